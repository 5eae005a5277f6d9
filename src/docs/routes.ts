import { Elysia } from "elysia";
import type { AppDeps } from "../app.ts";
import { renderDocsPage } from "./page.ts";

export function docsRoutes(deps: AppDeps) {
  const page = renderDocsPage(deps.config.publicBaseUrl);
  return new Elysia().get(
    "/docs",
    ({ set }) => {
      set.headers["content-type"] = "text/html; charset=utf-8";
      return page;
    },
    { detail: { hide: true } },
  );
}
