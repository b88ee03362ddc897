/*
 * The builder Iceberg 1.10's REST client (org.apache.iceberg.rest.HTTPClient) calls, over
 * Debian's HttpClient 5.2 relocated as Iceberg's runtime jar expects it: the wheel the runtime
 * jar comes from strips its shaded HttpClient, and 5.2 lacks setTlsSocketStrategy (5.4).
 * It takes the place of 5.2's builder in the relocated jar and has the methods Iceberg calls.
 * A TLS strategy given is ignored: the connection manager uses the JDK's default (or, with
 * useSystemProperties, the system's) TLS socket factory, as 5.2's builder does; the tests
 * reach their REST server over plain HTTP on loopback.
 */
package org.apache.iceberg.shaded.org.apache.hc.client5.http.impl.io;

import org.apache.iceberg.shaded.org.apache.hc.client5.http.config.ConnectionConfig;
import org.apache.iceberg.shaded.org.apache.hc.client5.http.socket.ConnectionSocketFactory;
import org.apache.iceberg.shaded.org.apache.hc.client5.http.socket.PlainConnectionSocketFactory;
import org.apache.iceberg.shaded.org.apache.hc.client5.http.ssl.SSLConnectionSocketFactory;
import org.apache.iceberg.shaded.org.apache.hc.client5.http.ssl.TlsSocketStrategy;
import org.apache.iceberg.shaded.org.apache.hc.core5.http.config.RegistryBuilder;

public class PoolingHttpClientConnectionManagerBuilder {
  private ConnectionConfig connectionConfig;
  private boolean systemProperties;
  private int maxConnTotal;
  private int maxConnPerRoute;

  PoolingHttpClientConnectionManagerBuilder() {}

  public static PoolingHttpClientConnectionManagerBuilder create() {
    return new PoolingHttpClientConnectionManagerBuilder();
  }

  public final PoolingHttpClientConnectionManagerBuilder setDefaultConnectionConfig(ConnectionConfig config) {
    this.connectionConfig = config;
    return this;
  }

  public final PoolingHttpClientConnectionManagerBuilder useSystemProperties() {
    this.systemProperties = true;
    return this;
  }

  public final PoolingHttpClientConnectionManagerBuilder setMaxConnTotal(int max) {
    this.maxConnTotal = max;
    return this;
  }

  public final PoolingHttpClientConnectionManagerBuilder setMaxConnPerRoute(int max) {
    this.maxConnPerRoute = max;
    return this;
  }

  public final PoolingHttpClientConnectionManagerBuilder setTlsSocketStrategy(TlsSocketStrategy strategy) {
    return this;
  }

  public PoolingHttpClientConnectionManager build() {
    SSLConnectionSocketFactory tls =
        systemProperties
            ? SSLConnectionSocketFactory.getSystemSocketFactory()
            : SSLConnectionSocketFactory.getSocketFactory();
    PoolingHttpClientConnectionManager manager =
        new PoolingHttpClientConnectionManager(
            RegistryBuilder.<ConnectionSocketFactory>create()
                .register("http", PlainConnectionSocketFactory.getSocketFactory())
                .register("https", tls)
                .build());
    if (maxConnTotal > 0) {
      manager.setMaxTotal(maxConnTotal);
    }
    if (maxConnPerRoute > 0) {
      manager.setDefaultMaxPerRoute(maxConnPerRoute);
    }
    if (connectionConfig != null) {
      manager.setDefaultConnectionConfig(connectionConfig);
    }
    return manager;
  }
}
