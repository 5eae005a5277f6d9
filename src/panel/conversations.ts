import { Elysia } from "elysia";
import type { AppDeps } from "../app.ts";
import { html } from "./html.ts";
import { page } from "./layout.ts";
import { htmlResponse, PANEL_PREFIX, signedIn } from "./web.ts";

/** Conversations: the list, one conversation's history, marking read, replying. */
export function conversationPages(deps: AppDeps) {
  return new Elysia({ prefix: PANEL_PREFIX }).get(
    "/conversations",
    signedIn(deps, ({ session, csrf }) =>
      htmlResponse(
        page({
          title: "Conversations",
          section: "conversations",
          session,
          csrf,
          body: html`<h1>Conversations</h1>`,
        }),
      ),
    ),
  );
}
