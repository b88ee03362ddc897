/*
 * HttpClient 5.4's TlsSocketStrategy, as far as Iceberg 1.10's REST client needs it: the type
 * of the argument of PoolingHttpClientConnectionManagerBuilder.setTlsSocketStrategy. Debian's
 * HttpClient (5.2) predates it; see PoolingHttpClientConnectionManagerBuilder.java here.
 */
package org.apache.iceberg.shaded.org.apache.hc.client5.http.ssl;

public interface TlsSocketStrategy {}
