// A loopback port nothing listens on: bound by the OS, then closed. The runner starts code-server
// on one; the errors suite points the extension at one to see "connection refused".
import * as net from "net";

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}
