/**
 * The generator's HTTP/1.1 client parses responses itself; a parsing slip would silently skew
 * every benchmark, so each framing it claims to support is checked here, whole and split into
 * single bytes.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { HttpConnection, buildRequest } from '../../bench/http-connection.js';
import type { HttpResponse } from '../../bench/http-connection.js';

/** A server that answers each request (one per `\r\n\r\n`) with the next scripted response. */
async function scriptedServer(responses: string[], opts: { byteByByte?: boolean; closeAfter?: number[] } = {}): Promise<{ port: number; connections: () => number; close: () => Promise<void> }> {
  let connections = 0;
  let next = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    connections++;
    sockets.add(socket);
    let pending = '';
    socket.on('data', (chunk) => {
      pending += chunk.toString('latin1');
      let end: number;
      while ((end = pending.indexOf('\r\n\r\n')) >= 0) {
        pending = pending.slice(end + 4);
        const i = next++;
        const response = Buffer.from(responses[i] ?? '', 'latin1');
        if (opts.byteByByte) {
          // One write per byte, spaced so they arrive as separate TCP reads.
          let j = 0;
          const tick = (): void => {
            if (j >= response.length) {
              if (opts.closeAfter?.includes(i)) socket.end();
              return;
            }
            socket.write(response.subarray(j, j + 1));
            j++;
            setImmediate(tick);
          };
          tick();
        } else {
          socket.write(response);
          if (opts.closeAfter?.includes(i)) socket.end();
        }
      }
    });
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => connections,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

function request(conn: HttpConnection, keepBody = true): Promise<HttpResponse> {
  return new Promise((resolve, reject) => {
    conn.send(buildRequest('GET', '/', 'test', {}), keepBody, 0, (err, res) => (err || !res ? reject(err ?? new Error('no response')) : resolve(res)));
  });
}

const RESPONSES = [
  'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello',
  'HTTP/1.1 201 Created\r\ncontent-type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n3;ext=1\r\n:1}\r\n0\r\n\r\n',
  'HTTP/1.1 204 No Content\r\n\r\n',
  'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\nno',
  'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n',
  'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Trailer: 1\r\n\r\n',
];
const EXPECTED = [
  [200, 'hello'],
  [201, '{"a":1}'],
  [204, ''],
  [404, 'no'],
  [200, ''],
  [200, 'ok'],
];

for (const byteByByte of [false, true]) {
  t.test(`http-connection - parses every framing on one keep-alive connection${byteByByte ? ', one byte per read' : ''}`, async (t) => {
    const server = await scriptedServer(RESPONSES, { byteByByte });
    t.teardown(server.close);
    const conn = new HttpConnection('127.0.0.1', server.port);
    await conn.open();
    for (const [status, body] of EXPECTED) {
      const res = await request(conn);
      t.equal(res.status, status, `status ${status}`);
      t.equal(res.body?.toString('latin1'), body, `body of ${status}`);
    }
    t.equal(server.connections(), 1, 'all on one connection');
    conn.close();
  });
}

t.test('http-connection - body is read but not kept when not asked for', async (t) => {
  const server = await scriptedServer([RESPONSES[0] as string, RESPONSES[1] as string]);
  t.teardown(server.close);
  const conn = new HttpConnection('127.0.0.1', server.port);
  t.equal((await request(conn, false)).body, undefined);
  t.equal((await request(conn, true)).body?.toString(), '{"a":1}', 'next response parsed from the right offset');
  conn.close();
});

t.test('http-connection - Connection: close and read-until-close reconnect for the next request', async (t) => {
  const server = await scriptedServer(
    ['HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\na', 'HTTP/1.1 200 OK\r\n\r\nuntil close', 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb'],
    { closeAfter: [0, 1] },
  );
  t.teardown(server.close);
  const conn = new HttpConnection('127.0.0.1', server.port);
  t.equal((await request(conn)).body?.toString(), 'a');
  t.equal((await request(conn)).body?.toString(), 'until close');
  t.equal((await request(conn)).body?.toString(), 'b');
  t.equal(server.connections(), 3, 'reconnected after each close');
  conn.close();
});

t.test('http-connection - a server that drops mid-response fails the request, not the process', async (t) => {
  const server = await scriptedServer(['HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc'], { closeAfter: [0] });
  t.teardown(server.close);
  const conn = new HttpConnection('127.0.0.1', server.port);
  await t.rejects(request(conn), /closed/);
  t.equal(conn.busy, false, 'ready for the next request');
  conn.close();
});
