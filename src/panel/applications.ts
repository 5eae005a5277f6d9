import { Elysia } from "elysia";
import type { AppDeps } from "../app.ts";
import { html } from "./html.ts";
import { page } from "./layout.ts";
import { htmlResponse, PANEL_PREFIX, signedIn } from "./web.ts";

/** Applications: list, create (secret shown once), rotate secret, revoke. */
export function applicationPages(deps: AppDeps) {
  return new Elysia({ prefix: PANEL_PREFIX }).get(
    "/applications",
    signedIn(deps, ({ session, csrf }) =>
      htmlResponse(
        page({
          title: "Applications",
          section: "applications",
          session,
          csrf,
          body: html`<h1>Applications</h1>`,
        }),
      ),
    ),
  );
}
