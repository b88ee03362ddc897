/*
 * An Iceberg REST catalog server for icecommit's tests, on Apache Iceberg's own server-side
 * code: CatalogHandlers (what each request does, including the server's check of a commit's
 * requirements), RESTObjectMapper with the REST request and response classes (the JSON), and
 * JdbcCatalog (where the tables are kept) from iceberg-spark-runtime 1.10.2. What the jar does
 * not hold is written here: the route table, /v1/config and the mapping of exceptions to HTTP
 * statuses, behind the JDK's own HTTP server.
 *
 * In package org.apache.iceberg.rest because RESTObjectMapper is package-private there.
 *
 *   java -cp <runtime jar>:<jackson shim>:<hadoop jars>:<jdbc driver>:<classes> \
 *     org.apache.iceberg.rest.TestRestServer PORT key=value...
 *
 * The key=value pairs are JdbcCatalog's properties (uri, jdbc.user, warehouse, ...). Once it
 * listens, the server prints "listening on PORT" on its standard output. It stops when its
 * standard input closes (the test process that started it went away) or on SIGTERM.
 */
package org.apache.iceberg.rest;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import org.apache.iceberg.BaseTable;
import org.apache.iceberg.BaseTransaction;
import org.apache.iceberg.Table;
import org.apache.iceberg.Transaction;
import org.apache.iceberg.Transactions;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.exceptions.AlreadyExistsException;
import org.apache.iceberg.exceptions.CommitFailedException;
import org.apache.iceberg.exceptions.CommitStateUnknownException;
import org.apache.iceberg.exceptions.NamespaceNotEmptyException;
import org.apache.iceberg.exceptions.NoSuchNamespaceException;
import org.apache.iceberg.exceptions.NoSuchTableException;
import org.apache.iceberg.exceptions.NoSuchViewException;
import org.apache.iceberg.exceptions.NotFoundException;
import org.apache.iceberg.exceptions.ValidationException;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.rest.requests.CommitTransactionRequest;
import org.apache.iceberg.rest.requests.CreateNamespaceRequest;
import org.apache.iceberg.rest.requests.CreateTableRequest;
import org.apache.iceberg.rest.requests.RegisterTableRequest;
import org.apache.iceberg.rest.requests.RenameTableRequest;
import org.apache.iceberg.rest.requests.UpdateNamespacePropertiesRequest;
import org.apache.iceberg.rest.requests.UpdateTableRequest;
import org.apache.iceberg.rest.responses.ConfigResponse;
import org.apache.iceberg.rest.responses.ErrorResponse;
import org.apache.iceberg.rest.responses.ErrorResponseParser;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.ObjectMapper;

public final class TestRestServer {
  private static final ObjectMapper MAPPER = RESTObjectMapper.mapper();
  // what /v1/config lists: every route below, transactions/commit among them
  private static final List<Endpoint> ENDPOINTS =
      List.of(
          Endpoint.V1_LIST_NAMESPACES,
          Endpoint.V1_LOAD_NAMESPACE,
          Endpoint.V1_NAMESPACE_EXISTS,
          Endpoint.V1_CREATE_NAMESPACE,
          Endpoint.V1_UPDATE_NAMESPACE,
          Endpoint.V1_DELETE_NAMESPACE,
          Endpoint.V1_COMMIT_TRANSACTION,
          Endpoint.V1_LIST_TABLES,
          Endpoint.V1_LOAD_TABLE,
          Endpoint.V1_TABLE_EXISTS,
          Endpoint.V1_CREATE_TABLE,
          Endpoint.V1_UPDATE_TABLE,
          Endpoint.V1_DELETE_TABLE,
          Endpoint.V1_RENAME_TABLE,
          Endpoint.V1_REGISTER_TABLE);

  /** A request's answer: an HTTP status and a body (null: none). */
  private static final class Answer {
    final int status;
    final Object body;

    Answer(int status, Object body) {
      this.status = status;
      this.body = body;
    }
  }

  private final JdbcCatalog catalog;

  private TestRestServer(JdbcCatalog catalog) {
    this.catalog = catalog;
  }

  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    Map<String, String> properties = new HashMap<>();
    for (int i = 1; i < args.length; i++) {
      int eq = args[i].indexOf('=');
      properties.put(args[i].substring(0, eq), args[i].substring(eq + 1));
    }
    JdbcCatalog jdbc = new JdbcCatalog();
    jdbc.setConf(new org.apache.hadoop.conf.Configuration());
    jdbc.initialize("rest_backend", properties);
    TestRestServer server = new TestRestServer(jdbc);
    HttpServer http = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 64);
    http.createContext("/", server::handle);
    http.setExecutor(Executors.newFixedThreadPool(16));
    http.start();
    System.out.println("listening on " + http.getAddress().getPort());
    System.out.flush();
    // the test process holds our standard input: when it goes, so do we
    InputStream in = System.in;
    while (in.read() >= 0) {
      // nothing is read from it
    }
    http.stop(0);
    System.exit(0);
  }

  private void handle(HttpExchange exchange) throws IOException {
    Answer answer;
    try {
      answer = route(exchange);
    } catch (Exception e) {
      answer = error(e);
    }
    byte[] body = answer.body == null ? new byte[0] : bytes(answer.body);
    exchange.getResponseHeaders().add("Content-Type", "application/json");
    boolean empty = answer.body == null || "HEAD".equals(exchange.getRequestMethod());
    exchange.sendResponseHeaders(answer.status, empty ? -1 : body.length);
    if (!empty) {
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(body);
      }
    }
    exchange.close();
  }

  private static byte[] bytes(Object body) throws IOException {
    if (body instanceof ErrorResponse) {
      return ErrorResponseParser.toJson((ErrorResponse) body).getBytes(StandardCharsets.UTF_8);
    }
    return MAPPER.writeValueAsBytes(body);
  }

  private static Answer error(Exception e) {
    int status = statusOf(e);
    String message = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    if (status == 500) {
      e.printStackTrace();
    }
    ErrorResponse response =
        ErrorResponse.builder()
            .responseCode(status)
            .withType(e.getClass().getSimpleName())
            .withMessage(message)
            .build();
    return new Answer(status, response);
  }

  /** The REST specification's status of each exception CatalogHandlers and JdbcCatalog raise. */
  private static int statusOf(Exception e) {
    if (e instanceof NoSuchTableException
        || e instanceof NoSuchNamespaceException
        || e instanceof NoSuchViewException
        || e instanceof NotFoundException) {
      return 404;
    }
    if (e instanceof CommitFailedException
        || e instanceof AlreadyExistsException
        || e instanceof NamespaceNotEmptyException) {
      return 409;
    }
    if (e instanceof CommitStateUnknownException) {
      return 500;
    }
    if (e instanceof ValidationException
        || e instanceof IllegalArgumentException
        || e instanceof IllegalStateException) {
      return 400;
    }
    if (e instanceof UnsupportedOperationException) {
      return 406;
    }
    return 500;
  }

  private <T> T read(HttpExchange exchange, Class<T> type) throws IOException {
    try (InputStream in = exchange.getRequestBody()) {
      return MAPPER.readValue(in, type);
    }
  }

  private static Map<String, String> query(HttpExchange exchange) {
    Map<String, String> query = new HashMap<>();
    String raw = exchange.getRequestURI().getRawQuery();
    if (raw == null || raw.isEmpty()) {
      return query;
    }
    for (String pair : raw.split("&")) {
      int eq = pair.indexOf('=');
      String key = eq < 0 ? pair : pair.substring(0, eq);
      String value = eq < 0 ? "" : pair.substring(eq + 1);
      query.put(
          URLDecoder.decode(key, StandardCharsets.UTF_8),
          URLDecoder.decode(value, StandardCharsets.UTF_8));
    }
    return query;
  }

  private Answer route(HttpExchange exchange) throws IOException {
    String method = exchange.getRequestMethod();
    String path = exchange.getRequestURI().getRawPath();
    if (!path.startsWith("/v1/")) {
      throw new NotFoundException("no route for %s %s", method, path);
    }
    String[] parts = path.substring("/v1/".length()).split("/");
    Map<String, String> query = query(exchange);
    if (parts.length == 1 && "config".equals(parts[0]) && "GET".equals(method)) {
      return new Answer(200, ConfigResponse.builder().withEndpoints(ENDPOINTS).build());
    }
    if (parts.length == 2
        && "transactions".equals(parts[0])
        && "commit".equals(parts[1])
        && "POST".equals(method)) {
      commitTransaction(read(exchange, CommitTransactionRequest.class));
      return new Answer(204, null);
    }
    if (parts.length == 2 && "tables".equals(parts[0]) && "rename".equals(parts[1])) {
      CatalogHandlers.renameTable(catalog, read(exchange, RenameTableRequest.class));
      return new Answer(204, null);
    }
    if (!"namespaces".equals(parts[0])) {
      throw new NotFoundException("no route for %s %s", method, path);
    }
    if (parts.length == 1) {
      if ("GET".equals(method)) {
        String parent = query.get("parent");
        Namespace ns = parent == null ? Namespace.empty() : RESTUtil.decodeNamespace(parent);
        return new Answer(200, CatalogHandlers.listNamespaces(catalog, ns));
      }
      if ("POST".equals(method)) {
        CreateNamespaceRequest request = read(exchange, CreateNamespaceRequest.class);
        return new Answer(200, CatalogHandlers.createNamespace(catalog, request));
      }
    }
    Namespace ns = RESTUtil.decodeNamespace(parts[1]);
    if (parts.length == 2) {
      switch (method) {
        case "GET":
          return new Answer(200, CatalogHandlers.loadNamespace(catalog, ns));
        case "HEAD":
          CatalogHandlers.namespaceExists(catalog, ns);
          return new Answer(204, null);
        case "DELETE":
          CatalogHandlers.dropNamespace(catalog, ns);
          return new Answer(204, null);
        default:
          break;
      }
    }
    if (parts.length == 3 && "properties".equals(parts[2]) && "POST".equals(method)) {
      UpdateNamespacePropertiesRequest request =
          read(exchange, UpdateNamespacePropertiesRequest.class);
      return new Answer(200, CatalogHandlers.updateNamespaceProperties(catalog, ns, request));
    }
    if (parts.length == 3 && "register".equals(parts[2]) && "POST".equals(method)) {
      RegisterTableRequest request = read(exchange, RegisterTableRequest.class);
      return new Answer(200, CatalogHandlers.registerTable(catalog, ns, request));
    }
    if (parts.length >= 3 && "tables".equals(parts[2])) {
      return tables(exchange, method, ns, parts, query);
    }
    throw new NotFoundException("no route for %s %s", method, path);
  }

  // as Iceberg's RESTCatalogAdapter does it: every table's requirements checked and its
  // updates applied in memory first (a conflict there changes no table), then each committed
  private void commitTransaction(CommitTransactionRequest request) {
    List<Transaction> transactions = new ArrayList<>();
    for (UpdateTableRequest change : request.tableChanges()) {
      Table table = catalog.loadTable(change.identifier());
      if (!(table instanceof BaseTable)) {
        throw new IllegalStateException("cannot commit a transaction to " + change.identifier());
      }
      Transaction transaction =
          Transactions.newTransaction(
              change.identifier().toString(), ((BaseTable) table).operations());
      transactions.add(transaction);
      BaseTransaction.TransactionTable inMemory =
          (BaseTransaction.TransactionTable) transaction.table();
      CatalogHandlers.commit(inMemory.operations(), change);
    }
    transactions.forEach(Transaction::commitTransaction);
  }

  private Answer tables(
      HttpExchange exchange, String method, Namespace ns, String[] parts, Map<String, String> query)
      throws IOException {
    if (parts.length == 3) {
      if ("GET".equals(method)) {
        return new Answer(200, CatalogHandlers.listTables(catalog, ns));
      }
      if ("POST".equals(method)) {
        CreateTableRequest request = read(exchange, CreateTableRequest.class);
        if (request.stageCreate()) {
          return new Answer(200, CatalogHandlers.stageTableCreate(catalog, ns, request));
        }
        return new Answer(200, CatalogHandlers.createTable(catalog, ns, request));
      }
    }
    if (parts.length == 4) {
      TableIdentifier ident = TableIdentifier.of(ns, RESTUtil.decodeString(parts[3]));
      switch (method) {
        case "GET":
          return new Answer(200, CatalogHandlers.loadTable(catalog, ident));
        case "HEAD":
          CatalogHandlers.tableExists(catalog, ident);
          return new Answer(204, null);
        case "POST":
          UpdateTableRequest request = read(exchange, UpdateTableRequest.class);
          return new Answer(200, CatalogHandlers.updateTable(catalog, ident, request));
        case "DELETE":
          if ("true".equals(query.get("purgeRequested"))) {
            CatalogHandlers.purgeTable(catalog, ident);
          } else {
            CatalogHandlers.dropTable(catalog, ident);
          }
          return new Answer(204, null);
        default:
          break;
      }
    }
    throw new NotFoundException("no route for %s %s", method, String.join("/", List.of(parts)));
  }
}
