import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { ElysiaAdapter } from "@bull-board/elysia";
import { Elysia } from "elysia";
import { ApiError, unknownPathError } from "../http/errors.ts";
import { pathOf } from "../http/paths.ts";
import { throwBodyProblem } from "../http/request-state.ts";
import { FAVICON_ICO_PATH, FAVICON_SVG_PATH } from "../lib/favicon.ts";
import { QUEUE_NAMES, type Queues } from "../queues/index.ts";

export const DASHBOARD_PATH = "/ops/queues";

/** bull-board's header link (a hashed class name that starts with "logo-"), legible below 769 px. */
const NARROW_TITLE_CSS =
  '@media (max-width:768px){header a[class*="logo-"]{color:var(--text-color);font-size:1.15rem}}';

/**
 * The queue dashboard: bull-board with its own Elysia adapter, over every queue (counts, jobs by
 * state, failed jobs with their reasons, retry). The adapter registers its UI assets asynchronously
 * (it lists the files of @bull-board/ui), and Elysia's lazy plugin loading does not survive being
 * nested, so the board is its own small Elysia app, built on first use, and the main app hands it
 * every request under DASHBOARD_PATH (see ops/routes.ts, which guards them first). The UI's assets
 * are served from node_modules by the adapter; nothing is loaded from a CDN.
 */
export function queueDashboard(queues: Queues, options: { readOnly: boolean }) {
  let board: Promise<Elysia> | undefined;
  const build = async (): Promise<Elysia> => {
    const adapter = new ElysiaAdapter(DASHBOARD_PATH);
    createBullBoard({
      // Read-only hides the UI's actions; handle() below refuses them on the server too.
      queues: QUEUE_NAMES.map((name) => new BullMQAdapter(queues[name], { readOnlyMode: options.readOnly })),
      serverAdapter: adapter,
      options: {
        uiConfig: {
          boardTitle: "Messaging queues",
          // The menu (and the title above it) wide enough for the title in a fallback font: the
          // board's own font comes from Google Fonts, which this page does not load.
          menu: { width: "300px" },
          boardLogo: { path: FAVICON_SVG_PATH, width: 26, height: 26 },
          favIcon: { default: FAVICON_SVG_PATH, alternative: FAVICON_ICO_PATH },
        },
      },
    });
    const plugin = await adapter.registerPlugin();
    // Before the board's own error handler, which would answer an unknown path with a 500.
    return new Elysia()
      .onError(({ code }) => (code === "NOT_FOUND" ? new Response(null, { status: 404 }) : undefined))
      .use(plugin) as unknown as Elysia;
  };

  /** Answers one request under DASHBOARD_PATH; `body` is the raw body the pipeline already read. */
  return async function handle(request: Request, body: Uint8Array | undefined): Promise<Response> {
    // Every action of the board (retry, promote, clean, empty, obliterate, add, pause, edit) is a
    // PUT, POST, PATCH or DELETE; reading is GET.
    if (options.readOnly && request.method !== "GET" && request.method !== "HEAD") {
      throw new ApiError(
        "insufficient_scope",
        "The queue dashboard is read-only; set OPS_QUEUES_WRITE=1 to allow job actions.",
        { status: 403 },
      );
    }
    // A body the pipeline's parser refused (too large, not JSON) is not forwarded: the usual 400/413.
    throwBodyProblem(request);
    board ??= build().catch((error) => {
      board = undefined;
      throw error;
    });
    const app = await board;
    // The pipeline's parser consumed the body; the board parses it again from the same bytes.
    const forwarded =
      request.method === "GET" || request.method === "HEAD"
        ? request
        : new Request(request.url, {
            method: request.method,
            headers: request.headers,
            body: (body as Uint8Array<ArrayBuffer> | undefined) ?? null,
          });
    const response = await app.handle(forwarded);
    if (response.status === 404 && !response.body) {
      throw unknownPathError(request.method, pathOf(request.url));
    }
    if (!response.headers.get("content-type")?.startsWith("text/html")) return response;
    // The page asks Google Fonts for its typeface; without it the page falls back to a system font.
    const html = (await response.text())
      .replace(/<link[^>]+fonts\.googleapis\.com[^>]*>/g, "")
      // On a narrow screen the board draws its (light) title on its light header: give it the text colour.
      .replace("</head>", `<style>${NARROW_TITLE_CSS}</style></head>`);
    const headers = new Headers(response.headers);
    headers.set("content-type", "text/html; charset=utf-8");
    headers.set("x-frame-options", "DENY");
    headers.set("cache-control", "no-store");
    return new Response(html, { status: response.status, headers });
  };
}
