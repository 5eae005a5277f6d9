import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { Elysia } from "elysia";
import type { AppDeps } from "../app-deps.ts";
import { POLICIES, routePolicy } from "../http/route-policy.ts";
import { FAVICON_ICO_PATH, FAVICON_SVG_PATH, faviconResponse } from "../lib/favicon.ts";
import type { OutboundSending } from "../messages/admission.ts";
import { applicationPages } from "./applications.ts";
import { conversationPages } from "./conversations.ts";
import { PANEL_PREFIX } from "./paths.ts";
import { senderPages } from "./senders.ts";
import { signInRoutes } from "./sign-in.ts";
import { redirect } from "./web.ts";
import { webhookPages } from "./webhooks.ts";

const ASSET_DIR = join(import.meta.dir, "assets");
const require = createRequire(import.meta.url);

/** Served from memory; htmx comes from its npm package (no CDN, no build step). */
const ASSETS: Record<string, { body: string; type: string }> = {
  "panel.css": { body: readFileSync(join(ASSET_DIR, "panel.css"), "utf8"), type: "text/css" },
  "panel.js": { body: readFileSync(join(ASSET_DIR, "panel.js"), "utf8"), type: "text/javascript" },
  "htmx.min.js": {
    body: readFileSync(require.resolve("htmx.org/dist/htmx.min.js"), "utf8"),
    type: "text/javascript",
  },
};

/**
 * The web panel at /panel (SPEC §1): integrators sign in, manage their applications and webhook
 * endpoints, see their senders and templates, and read and answer their customers. Server-rendered
 * HTML with htmx.
 */
export function panelRoutes(deps: AppDeps, sending: OutboundSending) {
  // Every page and form of the panel: its per-IP limit, 64 KB forms, errors as pages.
  return (
    new Elysia()
      .use(routePolicy)
      // The icon of every page (panel, docs, reference, queue dashboard); static, so no limit spent.
      .get(FAVICON_ICO_PATH, () => faviconResponse("ico"), {
        policy: POLICIES.public,
        detail: { hide: true },
      })
      .get(FAVICON_SVG_PATH, () => faviconResponse("svg"), {
        policy: POLICIES.public,
        detail: { hide: true },
      })
      .guard({ policy: { limit: "panel-ip", body: "form", errors: "page" } }, (panel) =>
        panel
          .get(PANEL_PREFIX, () => redirect(`${PANEL_PREFIX}/conversations`, false))
          .get(`${PANEL_PREFIX}/assets/:name`, ({ params, set }) => {
            const asset = ASSETS[params.name];
            if (!asset) {
              set.status = 404;
              return "Not found";
            }
            return new Response(asset.body, {
              headers: {
                "content-type": `${asset.type}; charset=utf-8`,
                "cache-control": "public, max-age=86400",
                "x-content-type-options": "nosniff",
              },
            });
          })
          .use(signInRoutes(deps))
          .use(applicationPages(deps))
          .use(senderPages(deps))
          .use(webhookPages(deps))
          .use(conversationPages(deps, sending)),
      )
  );
}
