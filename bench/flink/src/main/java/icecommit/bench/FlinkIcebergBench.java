package icecommit.bench;

import java.io.File;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ExecutionOptions;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.runtime.typeutils.InternalTypeInfo;
import org.apache.iceberg.DistributionMode;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.SupportsNamespaces;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.flink.CatalogLoader;
import org.apache.iceberg.flink.FlinkSchemaUtil;
import org.apache.iceberg.flink.TableLoader;
import org.apache.iceberg.flink.sink.IcebergSink;
import org.apache.iceberg.flink.sink.dynamic.DynamicIcebergSink;
import org.apache.iceberg.flink.sink.dynamic.DynamicRecord;
import org.apache.iceberg.types.Types;

/**
 * Flink's Iceberg sinks on a MiniCluster, the Flink side of bench/flink/run.py.
 *
 * <p>Modes (one per process; each prints one line "RESULT {json}"):
 *
 * <ul>
 *   <li>throughput: N generated rows through IcebergSink into bench.t, after an untimed
 *       warm-up into bench.warmup; the job's wall time.
 *   <li>latency: a throttled stream, one checkpoint every --checkpoint-ms; per checkpoint, the
 *       time from the barrier passing the source to the snapshot's timestamp.
 *   <li>route: N rows routed by event_id % tables into bench.r0..r{tables-1} by
 *       DynamicIcebergSink; the job's wall time.
 *   <li>kill: a throttled stream on two TaskManagers; one TaskManager is terminated while
 *       checkpoint --kill-at-checkpoint is being taken, a new one started, the job restarts
 *       from its last checkpoint. run.py counts the rows by reading the table back.
 * </ul>
 *
 * <p>The rows are the same function of a sequence number on both sides of the benchmark (see
 * run.py): event_id = i, ts = 2026-11-20 + i * 20 ms, event = EVENTS[i % 5], user_id = i %
 * 50,000, price = (i % 1000) / 10.
 */
public final class FlinkIcebergBench {
  static final long BASE_US = 1795132800000000L;
  static final long STEP_US = 20_000L;
  static final String[] EVENTS = {"pv", "show", "click", "cart", "buy"};
  static final Schema SCHEMA =
      new Schema(
          Types.NestedField.required(1, "event_id", Types.LongType.get()),
          Types.NestedField.required(2, "ts", Types.TimestampType.withZone()),
          Types.NestedField.required(3, "event", Types.StringType.get()),
          Types.NestedField.optional(4, "user_id", Types.LongType.get()),
          Types.NestedField.optional(5, "price", Types.DoubleType.get()));
  static final PartitionSpec SPEC = PartitionSpec.builderFor(SCHEMA).day("ts").identity("event").build();
  static final Namespace NS = Namespace.of("bench");

  /** Shared with the operators: the MiniCluster runs in this JVM, on this class loader. */
  static volatile MiniCluster cluster;

  static final Map<Long, Long> BARRIER_MS = new ConcurrentHashMap<>();
  static volatile boolean killed = false;
  static volatile long killedAtMs = 0;

  private FlinkIcebergBench() {}

  static RowData row(long i) {
    long us = BASE_US + i * STEP_US;
    GenericRowData row = new GenericRowData(5);
    row.setField(0, i);
    row.setField(1, TimestampData.fromEpochMillis(Math.floorDiv(us, 1000), (int) Math.floorMod(us, 1000) * 1000));
    row.setField(2, StringData.fromString(EVENTS[(int) (i % 5)]));
    row.setField(3, i % 50_000);
    row.setField(4, (i % 1000) / 10.0);
    return row;
  }

  /** Emits row(i) for each i, at most rowsPerSecond per subtask when positive; records barriers. */
  static final class Generate extends RichMapFunction<Long, RowData> implements CheckpointedFunction {
    private final double rowsPerSecond;
    private final long killAtCheckpoint;
    private transient long started;
    private transient long emitted;

    Generate(double rowsPerSecond, long killAtCheckpoint) {
      this.rowsPerSecond = rowsPerSecond;
      this.killAtCheckpoint = killAtCheckpoint;
    }

    @Override
    public void open(OpenContext context) {
      started = System.nanoTime();
      emitted = 0;
    }

    @Override
    public RowData map(Long i) throws Exception {
      if (rowsPerSecond > 0 && ++emitted % 10 == 0) {
        long due = started + (long) (emitted / rowsPerSecond * 1e9);
        long wait = due - System.nanoTime();
        if (wait > 0) {
          Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
        }
      }
      return row(i);
    }

    @Override
    public void snapshotState(FunctionSnapshotContext context) throws Exception {
      long id = context.getCheckpointId();
      BARRIER_MS.merge(id, System.currentTimeMillis(), Math::min);
      if (id == killAtCheckpoint && !killed && getRuntimeContext().getTaskInfo().getIndexOfThisSubtask() == 0) {
        killed = true;
        killedAtMs = System.currentTimeMillis();
        // terminate a TaskManager while this checkpoint is in flight (the writers have not
        // flushed it yet, the committer has not seen it), then bring up a replacement
        Thread killer =
            new Thread(
                () -> {
                  try {
                    // not the task's class loader: it is closed when the task is cancelled
                    Thread.currentThread().setContextClassLoader(ClassLoader.getSystemClassLoader());
                    cluster.terminateTaskManager(0).get();
                    cluster.startTaskManager();
                  } catch (Exception e) {
                    e.printStackTrace();
                  }
                });
        killer.setDaemon(true);
        killer.start();
        Thread.sleep(200);
      }
    }

    @Override
    public void initializeState(FunctionInitializationContext context) {}
  }

  static final class Args {
    final Map<String, String> values = new HashMap<>();

    Args(String[] args) {
      for (int k = 0; k + 1 < args.length; k += 2) {
        values.put(args[k].replaceFirst("^--", ""), args[k + 1]);
      }
    }

    String get(String key, String fallback) {
      return values.getOrDefault(key, fallback);
    }

    long num(String key, long fallback) {
      return Long.parseLong(get(key, Long.toString(fallback)));
    }
  }

  static Map<String, String> catalogProperties(Args args) {
    Map<String, String> props = new HashMap<>();
    props.put("uri", args.get("catalog-uri", null));
    props.put("warehouse", args.get("warehouse", null));
    props.put("jdbc.user", args.get("jdbc-user", "postgres"));
    props.put("jdbc.password", "");
    return props;
  }

  static CatalogLoader catalogLoader(Args args) {
    return CatalogLoader.custom(
        "bench", catalogProperties(args), new org.apache.hadoop.conf.Configuration(), "org.apache.iceberg.jdbc.JdbcCatalog");
  }

  static void createTable(Catalog catalog, String name, String distribution) {
    if (catalog instanceof SupportsNamespaces ns && !ns.namespaceExists(NS)) {
      ns.createNamespace(NS);
    }
    TableIdentifier id = TableIdentifier.of(NS, name);
    if (catalog.tableExists(id)) {
      catalog.dropTable(id, true);
    }
    catalog.createTable(id, SCHEMA, SPEC, Map.of("write.distribution-mode", distribution));
  }

  static MiniCluster startCluster(int taskManagers, int slots) throws Exception {
    Configuration conf = new Configuration();
    conf.set(RestOptions.BIND_PORT, "0");
    conf.set(TaskManagerOptions.NUM_TASK_SLOTS, slots);
    conf.set(TaskManagerOptions.MANAGED_MEMORY_SIZE, MemorySize.parse("64m"));
    MiniCluster mc =
        new MiniCluster(
            new MiniClusterConfiguration.Builder()
                .setConfiguration(conf)
                .setNumTaskManagers(taskManagers)
                .setNumSlotsPerTaskManager(slots)
                .build());
    mc.start();
    return mc;
  }

  static StreamExecutionEnvironment environment(Args args, boolean batch) {
    Configuration conf = new Configuration();
    conf.set(ExecutionOptions.RUNTIME_MODE, batch ? RuntimeExecutionMode.BATCH : RuntimeExecutionMode.STREAMING);
    if (!batch) {
      conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(args.num("checkpoint-ms", 1000)));
      conf.set(CheckpointingOptions.CHECKPOINTING_CONSISTENCY_MODE, org.apache.flink.core.execution.CheckpointingMode.EXACTLY_ONCE);
      conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, new File(args.get("work", "/tmp"), "flink-checkpoints").toURI().toString());
    }
    conf.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
    conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, 10);
    conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofMillis(500));
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
    env.setParallelism((int) args.num("parallelism", 2));
    return env;
  }

  static DataStream<RowData> rows(StreamExecutionEnvironment env, long first, long count, double rowsPerSecondPerTask, long killAt) {
    return env.fromSequence(first, first + count - 1)
        .map(new Generate(rowsPerSecondPerTask, killAt))
        .returns(InternalTypeInfo.of(FlinkSchemaUtil.convert(SCHEMA)))
        .name("generate");
  }

  static double run(JobGraph graph) throws Exception {
    long start = System.nanoTime();
    JobExecutionResult result = cluster.executeJobBlocking(graph);
    return (System.nanoTime() - start) / 1e9;
  }

  static double writeTable(Args args, String table, long rows, boolean batch) throws Exception {
    StreamExecutionEnvironment env = environment(args, batch);
    TableLoader loader = TableLoader.fromCatalog(catalogLoader(args), TableIdentifier.of(NS, table));
    IcebergSink.forRowData(rows(env, 0, rows, 0, -1))
        .tableLoader(loader)
        .distributionMode(DistributionMode.fromName(args.get("distribution", "hash")))
        .writeParallelism((int) args.num("parallelism", 2))
        .uidSuffix(table)
        .append();
    return run(env.getStreamGraph().getJobGraph());
  }

  static double route(Args args, String prefix, long rows, int tables, boolean batch) throws Exception {
    StreamExecutionEnvironment env = environment(args, batch);
    int parallelism = (int) args.num("parallelism", 2);
    DistributionMode mode = DistributionMode.fromName(args.get("distribution", "hash"));
    DynamicIcebergSink.forInput(rows(env, 0, rows, 0, -1))
        .generator(
            (RowData row, org.apache.flink.util.Collector<DynamicRecord> out) ->
                out.collect(
                    new DynamicRecord(
                        TableIdentifier.of(NS, prefix + (row.getLong(0) % tables)), "main", SCHEMA, row, SPEC, mode, parallelism)))
        .catalogLoader(catalogLoader(args))
        .writeParallelism(parallelism)
        .uidPrefix(prefix)
        .append();
    return run(env.getStreamGraph().getJobGraph());
  }

  static String json(Map<String, Object> values) {
    StringBuilder out = new StringBuilder("{");
    for (Map.Entry<String, Object> e : values.entrySet()) {
      if (out.length() > 1) {
        out.append(", ");
      }
      out.append('"').append(e.getKey()).append("\": ");
      Object v = e.getValue();
      if (v instanceof String s) {
        out.append('"').append(s).append('"');
      } else if (v instanceof List<?> list) {
        out.append(list.toString());
      } else {
        out.append(v);
      }
    }
    return out.append('}').toString();
  }

  public static void main(String[] argv) throws Exception {
    Args args = new Args(argv);
    String mode = args.get("mode", "throughput");
    boolean batch = args.get("runtime", "streaming").equals("batch");
    long rows = args.num("rows", 1_000_000);
    int parallelism = (int) args.num("parallelism", 2);
    Catalog catalog = catalogLoader(args).loadCatalog();
    Map<String, Object> result = new java.util.LinkedHashMap<>();
    result.put("mode", mode);
    result.put("runtime", batch ? "batch" : "streaming");
    result.put("rows", rows);
    String distribution = args.get("distribution", "hash");
    result.put("distribution", distribution);
    result.put("checkpoint_ms", batch ? 0 : args.num("checkpoint-ms", 1000));
    switch (mode) {
      case "throughput" -> {
        cluster = startCluster(1, parallelism);
        createTable(catalog, "warmup", distribution);
        createTable(catalog, "t", distribution);
        writeTable(args, "warmup", args.num("warmup-rows", 200_000), batch);
        result.put("seconds", writeTable(args, "t", rows, batch));
        result.put("snapshots", countSnapshots(catalog, "t"));
      }
      case "route" -> {
        int tables = (int) args.num("tables", 100);
        cluster = startCluster(1, parallelism);
        for (int k = 0; k < tables; k++) {
          createTable(catalog, "w" + k, distribution);
          createTable(catalog, "r" + k, distribution);
        }
        route(args, "w", args.num("warmup-rows", 200_000), tables, batch);
        result.put("seconds", route(args, "r", rows, tables, batch));
        result.put("tables", tables);
        long snapshots = 0;
        for (int k = 0; k < tables; k++) {
          snapshots += countSnapshots(catalog, "r" + k);
        }
        result.put("snapshots", snapshots);
      }
      case "latency" -> {
        cluster = startCluster(1, parallelism);
        createTable(catalog, "lat", distribution);
        double rate = args.num("rows-per-checkpoint", 1000) * 1000.0 / args.num("checkpoint-ms", 500) / parallelism;
        long total = args.num("rows-per-checkpoint", 1000) * (args.num("checkpoints", 300) + args.num("warmup", 5) + 3);
        StreamExecutionEnvironment env = environment(args, false);
        IcebergSink.forRowData(rows(env, 0, total, rate, -1))
            .tableLoader(TableLoader.fromCatalog(catalogLoader(args), TableIdentifier.of(NS, "lat")))
            .distributionMode(DistributionMode.fromName(distribution))
            .writeParallelism(parallelism)
            .append();
        result.put("seconds", run(env.getStreamGraph().getJobGraph()));
        result.put("rows", total);
        List<String> latencies = new ArrayList<>();
        Table table = catalog.loadTable(TableIdentifier.of(NS, "lat"));
        for (Snapshot s : table.snapshots()) {
          String cid = s.summary().get("flink.max-committed-checkpoint-id");
          if (cid == null || Long.parseLong(cid) <= args.num("warmup", 5)) {
            continue;
          }
          Long barrier = BARRIER_MS.get(Long.parseLong(cid));
          if (barrier != null) {
            latencies.add(String.format(Locale.ROOT, "[%s, %d, %s]", cid, s.timestampMillis() - barrier,
                s.summary().getOrDefault("added-records", "0")));
          }
        }
        result.put("checkpoints", latencies);
      }
      case "kill" -> {
        cluster = startCluster(2, 1);
        createTable(catalog, "kill", distribution);
        double rate = args.num("rows-per-second", 20_000) / (double) parallelism;
        StreamExecutionEnvironment env = environment(args, false);
        IcebergSink.forRowData(rows(env, 0, rows, rate, args.num("kill-at-checkpoint", 4)))
            .tableLoader(TableLoader.fromCatalog(catalogLoader(args), TableIdentifier.of(NS, "kill")))
            .distributionMode(DistributionMode.fromName(distribution))
            .writeParallelism(parallelism)
            .append();
        result.put("seconds", run(env.getStreamGraph().getJobGraph()));
        result.put("killed", killed);
        result.put("snapshots", countSnapshots(catalog, "kill"));
      }
      default -> throw new IllegalArgumentException("unknown mode " + mode);
    }
    cluster.close();
    System.out.println("RESULT " + json(result));
    System.out.flush();
    System.exit(0);
  }

  static long countSnapshots(Catalog catalog, String name) {
    long n = 0;
    for (Snapshot ignored : catalog.loadTable(TableIdentifier.of(NS, name)).snapshots()) {
      n++;
    }
    return n;
  }
}
