/*
 * Apache Iceberg's own REST catalog server, RESTCatalogServer of iceberg-open-api's test
 * fixtures, on loopback: the backend catalog made by RESTCatalogServer itself (its private
 * initializeBackendCatalog: the given properties over its defaults, a JdbcCatalog unless
 * catalog-impl says otherwise, jdbc.schema-version V1), served by RESTServerCatalogAdapter and
 * RESTCatalogServlet behind Jetty 12.1 with gzip compression, as RESTCatalogServer.start (1.11)
 * wires them.
 * Only the socket differs: RESTCatalogServer.start binds every interface on a fixed port
 * (rest.port, 8181); this binds 127.0.0.1 on a free port and prints it.
 *
 * In package org.apache.iceberg.rest because the adapter and the catalog context are
 * package-private there.
 *
 *   java -cp <DIR/iceberg-rest/*>:<hadoop jars>:<jdbc driver>:<classes> \
 *     org.apache.iceberg.rest.LoopbackRESTCatalogServer key=value...
 *
 * Once it listens, the server prints "listening on PORT" on its standard output. It stops
 * when its standard input closes (the test process that started it went away).
 */
package org.apache.iceberg.rest;

import java.io.InputStream;
import java.lang.reflect.Method;
import java.util.HashMap;
import java.util.Map;
import org.eclipse.jetty.compression.gzip.GzipCompression;
import org.eclipse.jetty.compression.server.CompressionHandler;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public final class LoopbackRESTCatalogServer {
  private LoopbackRESTCatalogServer() {}

  public static void main(String[] args) throws Exception {
    Map<String, String> properties = new HashMap<>();
    for (String arg : args) {
      int eq = arg.indexOf('=');
      properties.put(arg.substring(0, eq), arg.substring(eq + 1));
    }
    Method backend = RESTCatalogServer.class.getDeclaredMethod("initializeBackendCatalog");
    backend.setAccessible(true);
    RESTCatalogServer.CatalogContext context =
        (RESTCatalogServer.CatalogContext) backend.invoke(new RESTCatalogServer(properties));

    RESTCatalogServlet servlet = new RESTCatalogServlet(new RESTServerCatalogAdapter(context));
    ServletContextHandler handler = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    handler.addServlet(new ServletHolder(servlet), "/*");
    CompressionHandler compression = new CompressionHandler();
    compression.putCompression(new GzipCompression());
    handler.insertHandler(compression);

    Server http = new Server();
    ServerConnector connector = new ServerConnector(http);
    connector.setHost("127.0.0.1");
    connector.setPort(0);
    http.addConnector(connector);
    http.setHandler(handler);
    http.start();
    System.out.println("listening on " + connector.getLocalPort());
    System.out.flush();
    // the test process holds our standard input: when it goes, so do we
    InputStream in = System.in;
    while (in.read() >= 0) {
      // nothing is read from it
    }
    http.stop();
    System.exit(0);
  }
}
