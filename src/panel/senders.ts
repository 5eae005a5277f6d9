import { Elysia } from "elysia";
import type { AppDeps } from "../app.ts";
import { html } from "./html.ts";
import { page } from "./layout.ts";
import { htmlResponse, PANEL_PREFIX, signedIn } from "./web.ts";

/** Senders (connected numbers), their templates, and today's quota use. */
export function senderPages(deps: AppDeps) {
  return new Elysia({ prefix: PANEL_PREFIX }).get(
    "/senders",
    signedIn(deps, ({ session, csrf }) =>
      htmlResponse(
        page({
          title: "Senders & templates",
          section: "senders",
          session,
          csrf,
          body: html`<h1>Senders & templates</h1>`,
        }),
      ),
    ),
  );
}
