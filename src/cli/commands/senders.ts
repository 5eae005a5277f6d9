import { createWhatsAppProvider } from "../../channel/whatsapp.ts";
import { systemClock } from "../../clock.ts";
import { toE164 } from "../../contacts/phone.ts";
import { presentSenderForOperator } from "../../senders/presenter.ts";
import {
  findSenderById,
  findSenderByProviderPhoneNumberId,
  type NewSender,
  sealPlaintextAccessTokens,
} from "../../senders/repository.ts";
import {
  approvedTemplateCount,
  registerSender,
  setSenderActivity,
  trySyncSenderTemplates,
} from "../../senders/service.ts";
import { presentTemplateWithStatus } from "../../templates/presenter.ts";
import { type CliCommands, type CliContext, CliError, optionalInteger, required } from "../command.ts";
import { requireTenant } from "./tenants.ts";

/** `sender` and `templates`: a tenant's WhatsApp numbers, their provider tokens and their templates. */

/** What the simulator accepts; a real number needs its own token (--access-token). */
export const SIMULATOR_ACCESS_TOKEN = "sim-access-token";

function templateSyncDeps({ db, config, redis, keys }: CliContext) {
  return {
    config,
    db,
    redis,
    keys,
    clock: systemClock,
    provider: createWhatsAppProvider({ baseUrl: config.whatsappGraphUrl }),
  };
}

/**
 * `sender create` and the seed. The sender is created even when the provider cannot be reached (the
 * maintenance worker syncs every active sender later); the output then says so in `warning`.
 */
export async function createSender(ctx: CliContext, input: NewSender) {
  const duplicate = () =>
    new CliError(
      "duplicate_sender",
      `Provider phone-number id ${input.providerPhoneNumberId} belongs to a sender already; each number can be connected once`,
    );
  const taken = await findSenderByProviderPhoneNumberId(ctx.db, input.providerPhoneNumberId);
  if (taken) throw duplicate();
  let registered: Awaited<ReturnType<typeof registerSender>>;
  try {
    registered = await registerSender(templateSyncDeps(ctx), input);
  } catch (error) {
    // 23505 unique_violation: another process connected the same number just now.
    if ((error as { code?: string }).code === "23505") throw duplicate();
    throw error;
  }
  const { sender, sync } = registered;
  return {
    ...presentSenderForOperator(sender, await approvedTemplateCount(ctx.db, sender)),
    ...(!sync.ok && {
      warning: `Templates were not synced (${sync.reason}); the maintenance worker will sync them later.`,
    }),
  };
}

export const SENDER_COMMANDS: CliCommands = {
  "sender create": {
    usage: "Connect a WhatsApp number to a tenant and sync its templates.",
    flags: {
      tenant: "!the tenant's ten_ id",
      phone: "!the number, E.164 (+15550100001)",
      "phone-number-id": "!the provider's phone number id",
      "waba-id": "!the provider's business account id",
      "access-token": "the provider token (default: the simulator's)",
      name: "its display name",
      mps: "messages per second the send workers keep to (default 80)",
    },
    run: async (ctx, flags) => {
      const tenant = await requireTenant(ctx.db, required(flags, "tenant"));
      const phoneNumber = toE164(required(flags, "phone"));
      if (!phoneNumber) {
        throw new CliError("invalid_flag", "--phone must be a phone number in E.164 form, e.g. +15550100001");
      }
      return createSender(ctx, {
        tenantId: tenant.id,
        phoneNumber,
        providerPhoneNumberId: required(flags, "phone-number-id"),
        wabaId: required(flags, "waba-id"),
        accessToken: flags["access-token"] || SIMULATOR_ACCESS_TOKEN,
        name: flags.name || null,
        mps: optionalInteger(flags, "mps", 1),
      });
    },
  },

  "sender deactivate": {
    usage: "Stop sending from a sender.",
    flags: { sender: "!its snd_ id" },
    run: async (ctx, flags) => {
      const changed = await setSenderActivity(ctx, required(flags, "sender"), false);
      if (!changed) throw new CliError("sender_not_found", `No sender ${flags.sender}`);
      return {
        ...presentSenderForOperator(changed.sender, await approvedTemplateCount(ctx.db, changed.sender)),
        ...(!changed.announced && {
          warning: `Redis could not be told; api processes may still send from this sender for DIRECTORY_CACHE_MS (${ctx.config.directoryCacheMs} ms).`,
        }),
      };
    },
  },

  // Once after upgrading to encrypted tokens (docs/operations.md, "Secrets at rest"); safe to repeat.
  "sender encrypt-tokens": {
    usage: "Encrypt provider tokens stored in plain text (once, after upgrading).",
    run: async ({ db, config }) => ({
      object: "sender_tokens",
      encrypted: await sealPlaintextAccessTokens(db, config.providerTokenKey),
    }),
  },

  "templates sync": {
    usage: "Fetch a sender's templates from the provider now.",
    flags: { sender: "!its snd_ id" },
    run: async (ctx, flags) => {
      const sender = await findSenderById(ctx.db, required(flags, "sender"));
      if (!sender) throw new CliError("sender_not_found", `No sender ${flags.sender}`);
      const sync = await trySyncSenderTemplates(templateSyncDeps(ctx), sender);
      if (!sync.ok) throw new CliError("provider_unavailable", `Templates were not synced: ${sync.reason}`);
      return { object: "list", data: sync.templates.map(presentTemplateWithStatus) };
    },
  },
};
