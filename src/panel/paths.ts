/** The panel's fixed names, with no imports, so every panel module (layout.ts, web.ts) may use them. */
export const PANEL_PREFIX = "/panel";
/** Where a CSRF token travels: the hidden field of plain forms, the header of htmx requests. */
export const CSRF_FIELD = "_csrf";
export const CSRF_HEADER = "x-csrf-token";
