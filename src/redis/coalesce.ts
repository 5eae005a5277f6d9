import type { ChainableCommander } from "ioredis";
import { pipelinePerSlot, type RedisClient } from "./connect.ts";

/** A batch of calls that one Redis command answers (see `coalesced`). */
export interface CoalescedCommand<Call> {
  /** Calls of one group go in one command, so they must share a slot: one {hash tag}. */
  groupOf: (call: Call) => string;
  /** A key of the group's command (its hash tag places it on a Cluster). */
  keyOf: (call: Call) => string;
  /** Adds a group's one command; its reply holds one reply per call, in the calls' order. */
  add: (commands: ChainableCommander, calls: Call[]) => unknown;
  /** At most this many calls in one command (a longer group is split). */
  maxCalls: number;
}

/**
 * Calls gathered over a turn of the event loop and written to Redis together: the calls of a group
 * as ONE command (a script that loops over them), the groups as one pipeline per slot
 * (pipelinePerSlot: one socket write, one read of the replies). Under load the api admits sends by
 * the dozen per turn; a command each cost the api a Command object and a reply to parse, and Redis
 * a script run, for every send. Each call still gets its own reply, or its group's error.
 */
export function coalesced<Call, Reply>(
  redis: RedisClient,
  command: CoalescedCommand<Call>,
): (call: Call) => Promise<Reply> {
  interface Pending {
    call: Call;
    resolve: (reply: Reply) => void;
    reject: (error: unknown) => void;
  }
  let pending: Pending[] = [];

  const flush = () => {
    const byGroup = new Map<string, Pending[][]>();
    for (const entry of pending) {
      const key = command.groupOf(entry.call);
      const chunks = byGroup.get(key);
      const last = chunks?.at(-1);
      if (!chunks) byGroup.set(key, [[entry]]);
      else if (last && last.length < command.maxCalls) last.push(entry);
      else chunks.push([entry]);
    }
    pending = [];
    const groups = [...byGroup.values()].flat();
    pipelinePerSlot(
      redis,
      groups,
      (group) => command.keyOf(group[0]!.call),
      (pipeline, group) =>
        command.add(
          pipeline,
          group.map((entry) => entry.call),
        ),
    ).then(
      (replies) =>
        groups.forEach((group, g) => {
          const [error, reply] = replies[g] ?? [new Error("no reply"), null];
          group.forEach((entry, i) => {
            const own = (reply as Reply[] | null)?.[i];
            if (error) entry.reject(error);
            else if (own === undefined) entry.reject(new Error("no reply"));
            else entry.resolve(own);
          });
        }),
      (error) => {
        for (const group of groups) for (const entry of group) entry.reject(error);
      },
    );
  };

  return (call: Call) =>
    new Promise<Reply>((resolve, reject) => {
      if (pending.length === 0) setImmediate(flush);
      pending.push({ call, resolve, reject });
    });
}
