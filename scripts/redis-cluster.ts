/**
 * A local Redis Cluster of 3 masters (and, on request, a replica each) from the installed
 * `redis-server`, on free ports in a temporary folder: for running the suite against a Cluster
 * (.ci/run), the failover scenarios of bench/faults.ts (`--redis-cluster`), and trying it by hand.
 *
 *   bun scripts/redis-cluster.ts              starts it, prints REDIS_CLUSTER_NODES=..., runs until Ctrl-C
 *   bun scripts/redis-cluster.ts -- <cmd...>  starts it, runs <cmd> with REDIS_CLUSTER_NODES set, stops it,
 *                                             and exits with <cmd>'s status
 *
 * Nothing is saved (`--save "" --appendonly no`); the folder is removed when it stops.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { localRedisArgs, waitFor } from "./services.ts";

const MASTERS = 3;
const HOST = "127.0.0.1";

const say = (message: string) => console.error(`[redis-cluster] ${message}`);

/** A port nothing listens on now, and its cluster bus port (port + 10000) too. */
async function freePort(taken: Set<number>): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.once("error", reject);
      server.listen(0, HOST, () => {
        const address = server.address();
        server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
      });
    });
    if (port > 0 && port + 10_000 <= 65_535 && !taken.has(port) && (await canListen(port + 10_000))) {
      taken.add(port);
      return port;
    }
  }
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, HOST, () => server.close(() => resolve(true)));
  });
}

async function redisCli(port: number, ...args: string[]): Promise<{ code: number; out: string }> {
  const proc = Bun.spawn(["redis-cli", "-h", HOST, "-p", String(port), ...args], {
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { code, out: out + err };
}

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  if (!(await waitFor(check, 20))) throw new Error(`${what}: not within 20 s`);
}

export interface LocalCluster {
  /** The value for REDIS_CLUSTER_NODES. */
  nodes: string;
  /** The port of the master that serves `key`'s slot now. */
  masterOf(key: string): Promise<number>;
  /** Whether the node on `port` is a master now (a replica is promoted by the cluster itself). */
  isMaster(port: number): Promise<boolean>;
  /** Whether the node on `port` is a replica in sync with its master (so it may be promoted). */
  isSyncedReplica(port: number): Promise<boolean>;
  /** Kills the node on `port` with SIGKILL, as a crash would: it stays down. */
  kill(port: number): void;
  /** Starts the node on `port` again (it rejoins with its own cluster config: its slots, or as a replica). */
  restart(port: number): void;
  stop(): Promise<void>;
}

export interface ClusterOptions {
  /** Replicas per master (0: none, the default). */
  replicas?: number;
  /** `cluster-node-timeout`: how long a master may be unreachable before its replica is promoted. */
  nodeTimeoutMs?: number;
}

export async function startRedisCluster(options: ClusterOptions = {}): Promise<LocalCluster> {
  const replicas = options.replicas ?? 0;
  for (const tool of ["redis-server", "redis-cli"]) {
    if (!Bun.which(tool)) throw new Error(`${tool} is not installed (apt-get install redis-server)`);
  }
  const dir = mkdtempSync(join(tmpdir(), "redis-cluster-"));
  const taken = new Set<number>();
  const ports: number[] = [];
  for (let i = 0; i < MASTERS * (1 + replicas); i++) ports.push(await freePort(taken));
  const spawnNode = (port: number) =>
    Bun.spawn(
      [
        "redis-server",
        ...localRedisArgs(port, dir),
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        join(dir, `nodes-${port}.conf`),
        "--cluster-node-timeout",
        String(options.nodeTimeoutMs ?? 5000),
        "--logfile",
        join(dir, `redis-${port}.log`),
      ],
      { stdout: "ignore", stderr: "inherit" },
    );
  const servers = ports.map(spawnNode);
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    for (const server of servers) server.kill("SIGTERM");
    await Promise.race([Promise.all(servers.map((s) => s.exited)), Bun.sleep(5000)]);
    for (const server of servers) if (server.exitCode === null) server.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const port of ports) {
      await until(`redis-server on ${port}`, async () => (await redisCli(port, "ping")).out.includes("PONG"));
    }
    const nodes = ports.map((port) => `${HOST}:${port}`);
    const created = await redisCli(
      ports[0] as number,
      "--cluster",
      "create",
      ...nodes,
      "--cluster-replicas",
      String(replicas),
      "--cluster-yes",
    );
    if (created.code !== 0) throw new Error(`redis-cli --cluster create failed:\n${created.out}`);
    // Every node must know every slot's owner before a client that asks any of them is served.
    for (const port of ports) {
      await until(`cluster_state:ok on ${port}`, async () =>
        (await redisCli(port, "cluster", "info")).out.includes("cluster_state:ok"),
      );
    }
    // Replicas are attached after the slots are assigned: every node must know them, and each must
    // be replicating, before a failover can promote one.
    for (const port of ports) {
      await until(`${MASTERS * replicas} replicas known to ${port}`, async () => {
        const out = (await redisCli(port, "cluster", "nodes")).out;
        return out.split("\n").filter((line) => line.includes("slave")).length === MASTERS * replicas;
      });
      if (replicas === 0) continue;
      await until(`replication of ${port}`, async () => {
        const role = (await redisCli(port, "info", "replication")).out;
        return role.includes("role:master") || role.includes("master_link_status:up");
      });
    }
    const alive = () => ports.filter((_, i) => servers[i]?.exitCode === null && !servers[i]?.killed);
    const clusterNodes = async () => {
      for (const port of alive()) {
        const answer = await redisCli(port, "cluster", "nodes");
        if (answer.code === 0 && answer.out.includes("master")) return answer.out;
      }
      throw new Error("no node of the cluster answers");
    };
    return {
      nodes: nodes.join(","),
      stop,
      async masterOf(key) {
        const slot = Number((await redisCli(alive()[0] as number, "cluster", "keyslot", key)).out.trim());
        for (const line of (await clusterNodes()).split("\n")) {
          const [, address = "", flags = "", , , , , state, ...ranges] = line.split(" ");
          if (!flags.includes("master") || flags.includes("fail") || state !== "connected") continue;
          for (const range of ranges) {
            const [from, to = from] = range.split("-").map(Number);
            if (slot >= (from as number) && slot <= (to as number))
              return Number(address.split(":")[1]?.split("@")[0]);
          }
        }
        throw new Error(`no master serves the slot of ${key}`);
      },
      async isMaster(port) {
        const role = await redisCli(port, "role");
        return role.code === 0 && role.out.startsWith("master");
      },
      async isSyncedReplica(port) {
        const info = (await redisCli(port, "info", "replication")).out;
        return (
          info.includes("role:slave") &&
          info.includes("master_link_status:up") &&
          !info.includes("master_sync_in_progress:1")
        );
      },
      kill(port) {
        servers[ports.indexOf(port)]?.kill("SIGKILL");
      },
      restart(port) {
        servers[ports.indexOf(port)] = spawnNode(port);
      },
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

if (import.meta.main) {
  // Bun drops a `--` after the script's name; one that reaches us is dropped here.
  const args = process.argv.slice(2);
  const command = args[0] === "--" ? args.slice(1) : args;
  const replicasFlag = process.env.REDIS_CLUSTER_REPLICAS;
  const cluster = await startRedisCluster({ replicas: replicasFlag ? Number(replicasFlag) : 0 }).catch(
    (error: Error) => {
      say(error.message);
      process.exit(1);
    },
  );
  say(`${MASTERS} masters up`);
  console.log(`REDIS_CLUSTER_NODES=${cluster.nodes}`);
  let child: ReturnType<typeof Bun.spawn> | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    // With a command, it gets the signal and ends; the cluster stops after it.
    if (child) child.kill(signal);
    else void cluster.stop().then(() => process.exit(0));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  if (command.length === 0) {
    say("running; Ctrl-C stops it");
  } else {
    child = Bun.spawn(command, {
      stdio: ["inherit", "inherit", "inherit"],
      env: { ...process.env, REDIS_CLUSTER_NODES: cluster.nodes },
    });
    const code = await child.exited;
    await cluster.stop();
    process.exit(code);
  }
}
