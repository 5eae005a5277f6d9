import type { Db } from "../db/connect.ts";
import { ApiError } from "../http/errors.ts";
import { isId } from "../ids.ts";
import { listTenantSenders, type SenderRow } from "./repository.ts";

/**
 * The sender a request means (SPEC §4): the one named, or the tenant's only active sender. A named
 * sender that is unknown or another tenant's is 404; several active and none named is 400. Returns
 * undefined when none is named and the tenant has no active sender (each caller says what that
 * means for it); whether a named sender is active is the caller's check too.
 */
export function chooseSender(
  tenantSenders: readonly SenderRow[],
  senderId: string | undefined,
  param = "sender",
): SenderRow | undefined {
  if (senderId !== undefined) {
    const sender = tenantSenders.find((s) => s.id === senderId);
    if (!sender) throw new ApiError("resource_missing", `No such sender: ${senderId}.`, { param });
    return sender;
  }
  const active = tenantSenders.filter((s) => s.active);
  if (active.length > 1) {
    throw new ApiError(
      "parameter_missing",
      `This account has ${active.length} active senders; name one in ${param}.`,
      {
        param,
      },
    );
  }
  return active[0];
}

/** chooseSender over the tenant's senders as Postgres has them now. */
export async function resolveSender(
  db: Db,
  tenantId: string,
  senderId: string | undefined,
  param = "sender",
): Promise<SenderRow | undefined> {
  if (senderId !== undefined && !isId(senderId, "snd")) {
    throw new ApiError("resource_missing", `No such sender: ${senderId}.`, { param });
  }
  return chooseSender(await listTenantSenders(db, tenantId), senderId, param);
}
