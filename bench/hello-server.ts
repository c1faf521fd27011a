/**
 * The baseline: a raw uWS hello world in its own process, driven by the same generator as every
 * other scenario, so "× hello" says how far the real server is from what the HTTP layer and the
 * generator allow on this machine. Prints `{"msg":"listening","port":N}` like the real server.
 */
import uWS from '@trufflesuite/uws-js-unofficial';

// The package silently falls back to a slow JS shim without a matching native binary.
if (!String(uWS.App).includes('[native code]')) {
  console.error('uWS is not native on this Node version: the baseline would be meaningless');
  process.exit(3);
}

let listenSocket: uWS.us_listen_socket | null = null;

uWS
  .App()
  .any('/*', (res) => {
    res.writeHeader('Content-Type', 'text/plain').end('Hello World!');
  })
  .listen('127.0.0.1', 0, (socket) => {
    if (!socket) {
      console.error('hello server: listen failed');
      process.exit(1);
    }
    listenSocket = socket;
    console.log(JSON.stringify({ msg: 'listening', port: uWS.us_socket_local_port(socket) }));
  });

process.on('SIGTERM', () => {
  if (listenSocket) uWS.us_listen_socket_close(listenSocket);
  listenSocket = null;
  process.exit(0);
});
