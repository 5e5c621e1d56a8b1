/**
 * The host of `agentApiUrl` when the key would travel to it in clear text (`http://` to a host
 * that is not loopback: 127.0.0.0/8, ::1, localhost), else `undefined`. Allowed (a sidecar or a
 * proxy on a private network may need it), but worth a warning.
 */
export function clearTextApiHost(agentApiUrl: string): string | undefined {
  const url = new URL(agentApiUrl);
  if (url.protocol !== 'http:') return undefined;
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const loopback =
    host === 'localhost' ||
    host.endsWith('.localhost') ||
    host === '::1' ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
  return loopback ? undefined : url.hostname;
}
