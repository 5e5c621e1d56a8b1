import type { Overview, ProjectView } from '../producer/index.js';
import {
  button,
  dispatchLink,
  esc,
  prLink,
  searchForm,
  span,
  STYLE,
  table,
  td,
} from './page-parts.js';

export { esc, span } from './page-parts.js';

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
        td('Dispatch', dispatchLink(page, q.dispatchId)),
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
        td('Dispatch', dispatchLink(page, t.dispatchId)),
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
        td('Dispatch', dispatchLink(page, e.dispatchId)),
        td('Project', esc(e.projectId)),
        td('Job status', esc(e.status || '–')),
        td('Reason', esc(e.reason ?? '')),
        td('Pull request', prLink(e.prLink)),
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
  const partial = projectsPager(o, page);
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
<main>${notice}${banner}${problems}${searchForm(page.path, '')}
<section id="projects"><h2>Projects${partial}</h2>${table([...projectHeaders, ...(page.controls ? ['Action'] : [])], projectRows(o, page), 'No project has an open follow-up or a control.')}</section>
<section id="queued"><h2>Queued <small>oldest first</small></h2>${table(['Dispatch', 'Project', 'Agent job', 'Waiting', ...(page.controls ? ['Action'] : [])], queued, 'Nothing is queued.')}</section>
<section id="tracked"><h2>Tracked <small>${o.trackedTotal} sent, their agent job read until it ends</small></h2>${table(['Dispatch', 'Project', 'Agent job', 'Job status', 'Tracked for', 'Reads'], tracked, 'Nothing is tracked.')}</section>
<section id="dead-letters"><h2>Dead letters <small>${o.deadLettersTotal} ended undeliverable or timed out, kept for a redrive; newest first</small></h2>${table(['Dispatch', 'Project', 'Agent job', 'Ended', 'Reason', 'When', ...(page.controls ? ['Action'] : [])], deadLetterRows(o, page), 'No dead letter.')}</section>
<section id="events"><h2>Last events <small>newest first</small></h2>${table(['Type', 'Dispatch', 'Project', 'Job status', 'Reason', 'Pull request', 'When'], events, 'No event yet.')}</section>
</main></body></html>`;
}

function deadLetterRows(o: Overview, page: PageOptions): string[] {
  return o.deadLetters.map(
    (d) =>
      `<tr data-dead="${esc(d.dispatchId)}">${[
        td('Dispatch', dispatchLink(page, d.dispatchId)),
        td('Project', esc(d.projectId)),
        td('Agent job', esc(d.jobId)),
        td('Ended', esc(d.type.replace(/^followup\./, ''))),
        td('Reason', esc(d.reason)),
        td('When', `${span(o.at - d.finishedAt)} ago`, 'num'),
        ...(page.controls
          ? [
              td(
                'Action',
                d.redrivenTo
                  ? dispatchLink(page, d.redrivenTo)
                  : button(`${page.path}/${encodeURIComponent(d.dispatchId)}/redrive`, 'Redrive'),
              ),
            ]
          : []),
      ].join('')}</tr>`,
  );
}

/** Which projects the page shows of how many, with links to the pages before and after. */
function projectsPager(o: Overview, page: PageOptions): string {
  const per = 100;
  if (o.projectsTotal <= per && o.projectsPage === 0) return '';
  const from = o.projectsPage * per;
  const link = (n: number, text: string) =>
    `<a href="${esc(`${page.path}?projects=${n}`)}">${text}</a>`;
  const prev = o.projectsPage > 0 ? ` ${link(o.projectsPage - 1, '‹ previous')}` : '';
  const next = from + per < o.projectsTotal ? ` ${link(o.projectsPage + 1, 'next ›')}` : '';
  return ` <small>${from + 1}–${Math.min(from + per, o.projectsTotal)} of ${o.projectsTotal}${prev}${next}</small>`;
}
