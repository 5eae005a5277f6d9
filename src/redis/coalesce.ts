import type { ChainableCommander } from "ioredis";
import { pipelinePerSlot, type RedisClient } from "./connect.ts";

/**
 * Calls of one command gathered over a turn of the event loop and written to Redis as one pipeline
 * per slot (pipelinePerSlot: one socket write, one read of the replies) instead of a write each.
 * Under load the api admits sends by the dozen per turn, and the socket write per admission call
 * was its largest single cost (bench/send.ts --profile: 13% of the api's samples). Each call still
 * gets its own reply or error. `keyOf` names a key of the call (its hash tag places it on a Cluster).
 */
export function coalesced<Args extends unknown[], Reply>(
  redis: RedisClient,
  keyOf: (args: Args) => string,
  add: (commands: ChainableCommander, args: Args) => unknown,
): (...args: Args) => Promise<Reply> {
  interface Pending {
    args: Args;
    resolve: (reply: Reply) => void;
    reject: (error: unknown) => void;
  }
  let pending: Pending[] = [];

  const flush = () => {
    const calls = pending;
    pending = [];
    pipelinePerSlot(
      redis,
      calls,
      (call) => keyOf(call.args),
      (pipeline, call) => add(pipeline, call.args),
    ).then(
      (replies) =>
        calls.forEach((call, i) => {
          const [error, reply] = replies[i] ?? [new Error("no reply"), null];
          if (error) call.reject(error);
          else call.resolve(reply as Reply);
        }),
      (error) => {
        for (const call of calls) call.reject(error);
      },
    );
  };

  return (...args: Args) =>
    new Promise<Reply>((resolve, reject) => {
      if (pending.length === 0) setImmediate(flush);
      pending.push({ args, resolve, reject });
    });
}
