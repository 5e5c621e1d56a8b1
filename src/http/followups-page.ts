import type { Overview, ProjectView } from '../producer/index.js';

/**
 * The operator's page (`/dashboard/followups`), rendered on the server as plain HTML: no script,
 * so it works under a CSP of `default-src 'none'`. Tables turn into labelled cards below 720 px,
 * so it reads at 400 px as well as at 1,400 px. Every value is escaped.
 */

/** What the page shows besides the overview. */
export interface PageOptions {
  /** Base path of the page (`/dashboard/followups`). */
  readonly path: string;
  /** Where bull-board is. */
  readonly queuesPath: string;
  /** Pause, resume and cancel buttons (`DASHBOARD_ALLOW_CONTROLS`). */
  readonly controls: boolean;
  /** The outcome of the last action, shown once. */
  readonly notice?: { readonly ok: boolean; readonly text: string } | undefined;
}

const STYLE = `
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
const td = (label: string, html: string, cls = '') =>
  `<td data-label="${esc(label)}"${cls ? ` class="${cls}"` : ''}><div>${html}</div></td>`;

function table(headers: readonly string[], rows: readonly string[], empty: string): string {
  if (rows.length === 0) return `<p class="muted">${esc(empty)}</p>`;
  const head = headers.map((h) => `<th scope="col">${esc(h)}</th>`).join('');
  return `<table><thead><tr>${head}</tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function button(action: string, label: string, danger = false): string {
  const cls = danger ? ' class="danger"' : '';
  return `<form method="post" action="${esc(action)}"><button type="submit"${cls}>${esc(label)}</button></form>`;
}

/** The project's badges: what is wrong with its stored controls, paused, parked, out of budget, or sending. */
function badges(p: ProjectView, now: number): string {
  const out: string[] = [];
  if (p.problem)
    out.push(`<span class="badge parked" title="${esc(p.problem)}">${esc(p.problem)}</span>`);
  if (p.paused) out.push(`<span class="badge paused">paused</span>`);
  if (p.parkedUntil)
    out.push(
      `<span class="badge parked">parked (429) for ${span(Date.parse(p.parkedUntil) - now)}</span>`,
    );
  // Against the project's own reading time: `now` is the page's, read a moment before.
  const next = p.nextSlotAt === null ? 0 : Date.parse(p.nextSlotAt) - Date.parse(p.at);
  if (next > 0) out.push(`<span class="badge over">out of budget for ${span(next)}</span>`);
  if (out.length === 0) out.push(`<span class="badge ok">sending</span>`);
  return out.join('');
}

function projectRows(o: Overview, page: PageOptions): string[] {
  return o.projects.map((p) => {
    const max = Number(p.limit.split('/')[0]) || 1;
    const used = Math.min(100, Math.round((100 * p.sendsInWindow) / max));
    const base = `${page.path}/projects/${encodeURIComponent(p.projectId)}`;
    const action = p.paused ? button(`${base}/resume`, 'Resume') : button(`${base}/pause`, 'Pause');
    return `<tr data-project="${esc(p.projectId)}">${[
      td('Project', `<code>${esc(p.projectId)}</code>`),
      td('State', badges(p, o.at)),
      td('Limit', `${esc(p.limit)} <span class="muted">(${esc(p.limitSource)})</span>`),
      td(
        'Budget used',
        `${p.sendsInWindow} / ${max}${p.reservedSlots ? ` <span class="muted">+${p.reservedSlots} reserved</span>` : ''}<div class="bar"><i style="width:${used}%"></i></div>`,
        'num',
      ),
      td('Queued', String(p.queued), 'num'),
      td('Sending', String(p.sending), 'num'),
      td('Tracked', String(p.tracked), 'num'),
      ...(page.controls ? [td('Action', action)] : []),
    ].join('')}</tr>`;
  });
}

/** The whole page. */
export function renderPage(o: Overview, page: PageOptions): string {
  const queued = o.queued.map(
    (q) =>
      `<tr data-dispatch="${esc(q.dispatchId)}">${[
        td('Dispatch', `<code>${esc(q.dispatchId)}</code>`),
        td('Project', esc(q.projectId)),
        td('Agent job', esc(q.jobId)),
        td('Waiting', span(o.at - q.enqueuedAt), 'num'),
        ...(page.controls
          ? [
              td(
                'Action',
                button(`${page.path}/cancel/${encodeURIComponent(q.dispatchId)}`, 'Cancel', true),
              ),
            ]
          : []),
      ].join('')}</tr>`,
  );
  const tracked = o.tracked.map(
    (t) =>
      `<tr>${[
        td('Dispatch', `<code>${esc(t.dispatchId)}</code>`),
        td('Project', esc(t.projectId)),
        td('Agent job', esc(t.jobId)),
        td(
          'Job status',
          t.lastStatus ? esc(t.lastStatus) : '<span class="muted">not read yet</span>',
        ),
        td('Tracked for', t.sentAt ? span(o.at - t.sentAt) : '', 'num'),
        td('Reads', String(t.polls), 'num'),
      ].join('')}</tr>`,
  );
  const events = o.events.map(
    (e) =>
      `<tr>${[
        td('Type', esc(e.type.replace(/^followup\./, ''))),
        td('Dispatch', `<code>${esc(e.dispatchId)}</code>`),
        td('Project', esc(e.projectId)),
        td('Job status', esc(e.status || '–')),
        td('Reason', esc(e.reason ?? '')),
        td('When', `${span(o.at - Number(e.id.split('-')[0]))} ago`, 'num'),
      ].join('')}</tr>`,
  );
  const notice = page.notice
    ? `<p class="notice ${page.notice.ok ? 'ok' : 'fail'}" role="status">${esc(page.notice.text)}</p>`
    : '';
  const problems = o.problems.map((p) => `<p class="banner" role="alert">${esc(p)}</p>`).join('');
  const banner = o.sendPause
    ? `<p class="banner" role="alert">Every send is paused: the agent API answered ${o.sendPause.httpStatus} (the key, or AGENT_API_URL); next probe in ${span(o.sendPause.probeAt - o.at)}.</p>`
    : '';
  const partial = o.countsExact
    ? ''
    : ' <small>(counts of the oldest 5,000 open follow-ups)</small>';
  const projectHeaders = [
    'Project',
    'State',
    'Limit',
    'Budget used',
    'Queued',
    'Sending',
    'Tracked',
  ];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>agent-dispatch · follow-ups</title><style>${STYLE}</style></head>
<body><header><h1>agent-dispatch · follow-ups</h1><nav><a href="${esc(page.path)}">Refresh</a> · <a href="${esc(page.queuesPath)}">BullMQ queues</a></nav><span class="at">as of ${esc(new Date(o.at).toISOString())}</span></header>
<main>${notice}${banner}${problems}
<section id="projects"><h2>Projects${partial}</h2>${table([...projectHeaders, ...(page.controls ? ['Action'] : [])], projectRows(o, page), 'No project has an open follow-up or a control.')}</section>
<section id="queued"><h2>Queued <small>oldest first</small></h2>${table(['Dispatch', 'Project', 'Agent job', 'Waiting', ...(page.controls ? ['Action'] : [])], queued, 'Nothing is queued.')}</section>
<section id="tracked"><h2>Tracked <small>${o.trackedTotal} sent, their agent job read until it ends</small></h2>${table(['Dispatch', 'Project', 'Agent job', 'Job status', 'Tracked for', 'Reads'], tracked, 'Nothing is tracked.')}</section>
<section id="events"><h2>Last events <small>newest first</small></h2>${table(['Type', 'Dispatch', 'Project', 'Job status', 'Reason', 'When'], events, 'No event yet.')}</section>
</main></body></html>`;
}
