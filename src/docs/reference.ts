import { createHash } from "node:crypto";
import { dirname, join } from "node:path";
import { Elysia } from "elysia";
import swaggerUiPackage from "swagger-ui-dist/package.json" with { type: "json" };
import type { AppDeps } from "../app-deps.ts";
import { API_PREFIX } from "../http/paths.ts";
import { POLICIES, routePolicy } from "../http/route-policy.ts";
import { FAVICON_LINKS } from "../lib/favicon.ts";
import { buildOpenApiDocument, type DocumentedRoute } from "./openapi.ts";

/** The API version in the document (SPEC §9). */
export const API_VERSION = "2.0.0";

/**
 * `{base_url}/openapi.json` and the interactive reference at `{base_url}/reference`: Swagger UI served
 * from the swagger-ui-dist package through our own routes, so the page works without any CDN.
 */
const SWAGGER_UI_DIR = dirname(Bun.resolveSync("swagger-ui-dist/package.json", import.meta.dir));
const SWAGGER_UI_ASSETS = {
  "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
  "swagger-ui.css": "text/css; charset=utf-8",
} as const;
// The asset URLs carry the package version, so a year-long cache never serves an old file.
const ASSET_CACHE = "public, max-age=31536000, immutable";
const PAGE_PATH = "/reference";
const assetPath = (name: string) => `${PAGE_PATH}/${name}`;

const escapeHtml = (text: string) =>
  text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll('"', "&quot;");

/**
 * @param routes every route of the finished app, read when the document is first asked for.
 */
export function apiReferenceRoutes(deps: Pick<AppDeps, "config">, routes: () => readonly DocumentedRoute[]) {
  const baseUrl = deps.config.publicBaseUrl.replace(/\/+$/, "");
  // Where the browser finds us: the public base URL's path (a proxy may mount the API elsewhere).
  const basePath = new URL(baseUrl).pathname.replace(/\/+$/, "");
  const page = renderReferencePage(baseUrl, basePath);
  // The routes are complete by the first request; the document is built then, once.
  let openApiDocument: unknown;

  const app = new Elysia({ name: "api-reference" })
    .use(routePolicy)
    .get(
      "/openapi.json",
      () =>
        (openApiDocument ??= buildOpenApiDocument(routes(), {
          baseUrl,
          prefix: API_PREFIX,
          version: API_VERSION,
        })),
      { policy: POLICIES.apiRead, detail: { hide: true } },
    )
    .get(
      PAGE_PATH,
      ({ set }) => {
        set.headers["content-type"] = "text/html; charset=utf-8";
        set.headers["cache-control"] = "no-cache";
        set.headers["content-security-policy"] = page.csp;
        return page.html;
      },
      // A page load is several requests: static files spend no limit, so the API can still be tried.
      { policy: POLICIES.public, detail: { hide: true } },
    );
  for (const [name, type] of Object.entries(SWAGGER_UI_ASSETS)) {
    const file = join(SWAGGER_UI_DIR, name);
    app.get(
      assetPath(name),
      // A Response of our own: Elysia's file answer would add a Content-Range to a plain 200.
      () => new Response(Bun.file(file), { headers: { "content-type": type, "cache-control": ASSET_CACHE } }),
      { policy: POLICIES.public, detail: { hide: true } },
    );
  }
  return app;
}

function renderReferencePage(baseUrl: string, basePath: string): { html: string; csp: string } {
  const asset = (name: keyof typeof SWAGGER_UI_ASSETS) =>
    escapeHtml(`${basePath}${assetPath(name)}?v=${swaggerUiPackage.version}`);
  const init = `window.ui = SwaggerUIBundle(${JSON.stringify({
    url: `${basePath}/openapi.json`,
    dom_id: "#swagger-ui",
    deepLinking: true,
    // Swagger UI would otherwise send the document to an external validator for its badge.
    validatorUrl: null,
    // Never keep the client secret or a token in localStorage (same origin as the panel).
    persistAuthorization: false,
    displayRequestDuration: true,
    defaultModelsExpandDepth: 0,
  }).replaceAll("<", "\\u003c")});`;
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Messaging API v2 reference</title>
${FAVICON_LINKS}
<link rel="stylesheet" href="${asset("swagger-ui.css")}">
<style>body{margin:0}
.site-nav{font:15px/1.5 system-ui,sans-serif;border-bottom:1px solid #ddd;background:#fafafa}
.site-nav ul{list-style:none;display:flex;flex-wrap:wrap;gap:.25rem 1.25rem;max-width:1460px;margin:0 auto;padding:.6rem 20px;box-sizing:border-box}
.site-nav a{color:#0b57d0}.site-nav a[aria-current]{color:#1a1a1a;font-weight:600;text-decoration:none}</style>
</head><body>
<header><nav class="site-nav" aria-label="Developer documentation"><ul>
<li><a href="${escapeHtml(basePath)}/docs">Docs &amp; error codes</a></li>
<li><a href="${escapeHtml(basePath)}${PAGE_PATH}" aria-current="page">API reference</a></li>
<li><a href="${escapeHtml(basePath)}/openapi.json">openapi.json</a></li>
<li><a href="/panel">Panel</a></li>
</ul></nav></header>
<main><div id="swagger-ui"></div></main>
<script src="${asset("swagger-ui-bundle.js")}"></script>
<script>${init}</script>
</body></html>`;
  const initHash = createHash("sha256").update(init).digest("base64");
  const apiOrigin = new URL(baseUrl).origin;
  const csp = [
    "default-src 'none'",
    `script-src 'self' 'sha256-${initHash}'`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    // The document, "Try it out" and the client credentials flow talk to the API only.
    `connect-src 'self' ${apiOrigin}`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
  return { html, csp };
}
