import { type Html, html } from "./html.ts";

/**
 * Helpers for `table.list.cards`: a table on a laptop, one card per row on a phone (panel.css).
 * Changing a table's CSS display makes some browsers drop its table semantics, so these tables
 * carry explicit ARIA roles (table, rowgroup, row, columnheader, rowheader, cell).
 */

/** A data cell; on a phone `label` is shown beside the value (the column header is hidden there). */
export function cell(label: string, content: Html | string | number, className?: string): Html {
  return html`<td role="cell" data-label="${label}"${className ? html` class="${className}"` : ""}><div class="cell">${content}</div></td>`;
}

export function columnHeaders(labels: (string | Html)[]): Html {
  return html`<thead role="rowgroup"><tr role="row">${labels.map((l) => html`<th scope="col" role="columnheader">${l}</th>`)}</tr></thead>`;
}
