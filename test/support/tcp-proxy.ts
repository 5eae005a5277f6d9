import { createConnection, createServer, type Server, type Socket } from "node:net";

/**
 * A TCP proxy in front of Postgres or Redis that a test can cut (every open connection dropped,
 * new ones refused at once) and restore: the dependency "goes away" without stopping the shared
 * server other test files use.
 */
export interface TcpProxy {
  port: number;
  /** Drops every connection and refuses new ones until `restore`. */
  cut(): void;
  restore(): void;
  /**
   * The next answer the target starts to send is not passed on: that connection is dropped instead,
   * so the client's request was received (and acted on) but its answer is lost.
   */
  dropNextAnswer(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let down = false;
  let dropAnswer = false;
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
  };
  const server: Server = createServer((client) => {
    track(client);
    if (down) {
      client.destroy();
      return;
    }
    const upstream = createConnection(target.port, target.host);
    track(upstream);
    client.pipe(upstream);
    upstream.on("data", (chunk: Buffer) => {
      if (dropAnswer) {
        dropAnswer = false;
        client.destroy();
        upstream.destroy();
        return;
      }
      // What pipe would do: hold the target while the client is slow to read.
      if (!client.write(chunk)) {
        upstream.pause();
        client.once("drain", () => upstream.resume());
      }
    });
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (!address || typeof address === "string") throw new Error("proxy has no port");
  return {
    port: address.port,
    cut() {
      down = true;
      for (const socket of sockets) socket.destroy();
    },
    restore() {
      down = false;
    },
    dropNextAnswer() {
      dropAnswer = true;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
