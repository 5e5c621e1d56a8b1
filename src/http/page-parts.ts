/**
 * The pieces the follow-ups pages share (`followups-page.ts`, `followup-page.ts`): the style sheet,
 * escaping, durations, tables, buttons, links. Every value is escaped.
 */

export const STYLE = `
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,sans-serif;color:#1d2430;background:#f4f6f9}
header{display:flex;flex-wrap:wrap;gap:.5rem 1.5rem;align-items:baseline;padding:.8rem 1.2rem;background:#1f2a44;color:#fff}
header h1{font-size:1.15rem;margin:0}header a{color:#bcd3ff}header .at{margin-left:auto;opacity:.8;font-size:.85rem}
main{padding:1rem 1.2rem;max-width:1600px}section{margin-bottom:1.6rem}
h2{font-size:1rem;margin:.2rem 0 .5rem}h2 small{font-weight:normal;color:#5b6576}
table{width:100%;border-collapse:collapse;background:#fff;border:1px solid #d8dde6}
th,td{padding:.4rem .6rem;text-align:left;border-bottom:1px solid #e6e9ef;vertical-align:top}
th{background:#eef1f6;font-weight:600;font-size:.8rem;text-transform:uppercase;letter-spacing:.03em;color:#46505f}
td.num{font-variant-numeric:tabular-nums}code{font-size:.85em;word-break:break-all}
.badge{display:inline-block;padding:.05rem .45rem;border-radius:.6rem;font-size:.8rem;font-weight:600;margin:0 .2rem .1rem 0}
.ok{background:#dcf3e3;color:#17602f}.paused{background:#fde7c2;color:#7a4a00}.parked{background:#fbd5d5;color:#8a1c1c}
.over{background:#dde6fb;color:#23418a}.muted{color:#5b6576}
.bar{height:.45rem;background:#e6e9ef;border-radius:.3rem;min-width:5rem;margin-top:.2rem}.bar i{display:block;height:100%;border-radius:.3rem;background:#3d6fd8}
form{display:inline}button{font:inherit;padding:.2rem .7rem;border:1px solid #8c98ad;border-radius:.3rem;background:#fff;cursor:pointer}
button.danger{border-color:#c24141;color:#9b1c1c}
.notice{padding:.6rem 1rem;margin-bottom:1rem;border-radius:.3rem}.notice.ok{border:1px solid #8fd1a3}.notice.fail{background:#fbd5d5;border:1px solid #e08f8f}
input{font:inherit;padding:.2rem .5rem;border:1px solid #8c98ad;border-radius:.3rem;min-width:16rem}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1rem;background:#fff;border:1px solid #d8dde6;padding:.8rem;margin:0}dt{font-weight:600;color:#46505f}dd{margin:0}
ol.timeline{background:#fff;border:1px solid #d8dde6;margin:0;padding:.8rem 2rem}ol.timeline li.no{color:#8c98ad}
pre{background:#fff;border:1px solid #d8dde6;padding:.8rem;overflow:auto;font-size:.85em}
.banner{padding:.6rem 1rem;margin-bottom:1rem;background:#fbd5d5;border:1px solid #e08f8f;border-radius:.3rem}
@media (max-width:720px){
 main{padding:.6rem}header .at{margin-left:0}
 table,thead,tbody,tr,td{display:block;width:100%}thead{display:none}table{border:0;background:none}
 tr{background:#fff;border:1px solid #d8dde6;border-radius:.4rem;margin-bottom:.6rem;padding:.3rem .2rem}
 td{border:0;padding:.2rem .6rem;display:flex;gap:.8rem;justify-content:space-between}
 td::before{content:attr(data-label);font-weight:600;color:#46505f;flex:none}
 td>div{text-align:right;min-width:0}td .bar{margin-left:auto}
}`;

/** Escapes text for HTML content and attribute values. */
export function esc(text: unknown): string {
  return String(text).replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c,
  );
}

/** A duration as an operator reads it: `45s`, `3m 12s`, `2h 5m`, `3d 4h`. */
export function span(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86_400)}d ${Math.floor((s % 86_400) / 3600)}h`;
}

// The content is one block: in the narrow layout the cell is a flex row of its label and it.
export const td = (label: string, html: string, cls = '') =>
  `<td data-label="${esc(label)}"${cls ? ` class="${cls}"` : ''}><div>${html}</div></td>`;

export function table(headers: readonly string[], rows: readonly string[], empty: string): string {
  if (rows.length === 0) return `<p class="muted">${esc(empty)}</p>`;
  const head = headers.map((h) => `<th scope="col">${esc(h)}</th>`).join('');
  return `<table><thead><tr>${head}</tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

export function button(action: string, label: string, danger = false): string {
  const cls = danger ? ' class="danger"' : '';
  return `<form method="post" action="${esc(action)}"><button type="submit"${cls}>${esc(label)}</button></form>`;
}

/** A dispatch id, linked to its own page. */
export function dispatchLink(page: { readonly path: string }, dispatchId: string): string {
  return `<a href="${esc(`${page.path}/${encodeURIComponent(dispatchId)}`)}"><code>${esc(dispatchId)}</code></a>`;
}

/** A pull request's link, when it is an http(s) one; anything else as text. */
export function prLink(link: string | null | undefined): string {
  if (!link) return '<span class="muted">–</span>';
  if (!/^https?:\/\//i.test(link)) return esc(link);
  return `<a href="${esc(link)}" rel="noopener noreferrer" target="_blank">${esc(link.replace(/^https?:\/\//i, ''))}</a>`;
}

/** The search form: a dispatch id, an idempotency key or an agent job id. */
export function searchForm(path: string, value: string): string {
  return `<form method="get" action="${esc(path)}" role="search" class="search"><input name="q" value="${esc(value)}" placeholder="dispatch id, idempotency key or agent job id" aria-label="search follow-ups"> <input type="submit" value="Search"></form>`;
}
