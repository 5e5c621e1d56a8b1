import type { FollowupDetail } from '../producer/index.js';
import { REDRIVABLE } from '../producer/redrive.js';
import { button, dispatchLink, esc, prLink, searchForm, STYLE } from './page-parts.js';

/**
 * The page of one follow-up (`/dashboard/followups/:dispatchId`) and the search's answer
 * (`/dashboard/followups?q=`), plain HTML as the follow-ups page is: its timeline from what its
 * record keeps, attempts, reason, pull request, its redrive links, its event, and the buttons an
 * operator may press (cancel while queued, redrive a dead letter).
 */

/** What the page shows besides the follow-up. */
export interface FollowupPageOptions {
  /** The follow-ups page's path (`/dashboard/followups`). */
  readonly path: string;
  /** Cancel and redrive buttons (an operator's token and `DASHBOARD_ALLOW_CONTROLS`). */
  readonly controls: boolean;
  readonly notice?: { readonly ok: boolean; readonly text: string } | undefined;
}

function shell(title: string, path: string, query: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>agent-dispatch · ${esc(title)}</title><style>${STYLE}</style></head>
<body><header><h1>agent-dispatch · ${esc(title)}</h1><nav><a href="${esc(path)}">All follow-ups</a></nav></header>
<main>${searchForm(path, query)}${body}</main></body></html>`;
}

const when = (ms: number | undefined) =>
  ms === undefined
    ? ''
    : `<time datetime="${esc(new Date(ms).toISOString())}">${esc(new Date(ms).toISOString())}</time>`;

/** The page of one follow-up. */
export function renderFollowup(d: FollowupDetail, page: FollowupPageOptions): string {
  const r = d.record;
  const ended = r.state === 'done';
  const steps: [string, number | undefined, string][] = [
    ['queued', r.enqueuedAt, ''],
    ['sending', r.sendingAt, r.attempts > 1 ? `attempt ${r.attempts}` : ''],
    ['sent', r.sentAt, ''],
    ['seen active', r.seenActive ? (r.activeAt ?? r.sentAt) : undefined, ''],
    ['ended', r.finishedAt, r.type ? r.type.replace(/^followup\./, '') : ''],
  ];
  const timeline = steps
    .map(([name, at, note]) =>
      at === undefined
        ? `<li class="no" data-step="${esc(name)}">${esc(name)} <span class="muted">–</span></li>`
        : `<li data-step="${esc(name)}"><strong>${esc(name)}</strong> ${when(at)}${note ? ` <span class="muted">(${esc(note)})</span>` : ''}</li>`,
    )
    .join('');
  const row = (name: string, html: string) => `<dt>${esc(name)}</dt><dd>${html}</dd>`;
  const link = (id: string | undefined) =>
    id ? dispatchLink(page, id) : '<span class="muted">–</span>';
  const facts = [
    row('Dispatch', `<code>${esc(r.dispatchId)}</code>`),
    row('Project', esc(r.projectId)),
    row('Agent job', esc(r.jobId)),
    row('Idempotency key', r.key ? `<code>${esc(r.key)}</code>` : '<span class="muted">–</span>'),
    row('State', esc(r.state)),
    row('Ended', esc(r.type ?? '–')),
    row('Reason', esc(r.reason ?? '–')),
    row('Attempts', String(r.attempts)),
    row('Job status', esc(r.lastStatus ?? '–')),
    row('Pull request', prLink(r.job?.prLink)),
    row('Status reads', String(r.polls)),
    row('Redrive of', link(d.redriveOf)),
    row('Redriven as', link(d.redrivenTo)),
  ].join('');
  const actions: string[] = [];
  const base = `${page.path}/${encodeURIComponent(r.dispatchId)}`;
  const deadLetter = ended && r.type !== undefined && REDRIVABLE.has(r.type);
  if (page.controls && deadLetter && !d.redrivenTo && d.promptKept)
    actions.push(button(`${base}/redrive`, 'Redrive'));
  if (page.controls && r.state === 'queued')
    actions.push(button(`${page.path}/cancel/${encodeURIComponent(r.dispatchId)}`, 'Cancel', true));
  const why =
    deadLetter && !d.redrivenTo && !d.promptKept
      ? '<p class="muted">Its prompt is no longer kept (DEAD_LETTER_RETENTION): it cannot be redriven.</p>'
      : '';
  const notice = page.notice
    ? `<p class="notice ${page.notice.ok ? 'ok' : 'fail'}" role="status">${esc(page.notice.text)}</p>`
    : '';
  const event = d.event ? eventText(d.event) : '';
  return shell(
    `follow-up ${r.dispatchId}`,
    page.path,
    '',
    `${notice}<section id="facts"><h2>Follow-up</h2><dl>${facts}</dl></section>
<section id="timeline"><h2>Timeline</h2><ol class="timeline">${timeline}</ol></section>
${actions.length > 0 || why ? `<section id="actions"><h2>Actions</h2>${actions.join(' ')}${why}</section>` : ''}
<section id="event"><h2>Event${d.eventId ? ` <small>${esc(d.eventId)}</small>` : ''}</h2>${event ? `<pre>${esc(event)}</pre>` : `<p class="muted">${ended ? 'No longer on the events stream.' : 'Not ended yet.'}</p>`}</section>`,
  );
}

/** The event's fields as JSON, its `event` field parsed. */
function eventText(fields: Readonly<Record<string, string>>): string {
  const shown: Record<string, unknown> = { ...fields };
  try {
    shown['event'] = JSON.parse(fields['event'] ?? '');
  } catch {
    // Shown as stored.
  }
  return JSON.stringify(shown, null, 2);
}

/** The page of a follow-up that is not there (unknown, or expired). */
export function renderMissing(dispatchId: string, path: string): string {
  return shell(
    'follow-up not found',
    path,
    '',
    `<p class="banner" role="alert">No follow-up <code>${esc(dispatchId)}</code>: unknown, or expired after DISPATCH_RETENTION.</p>`,
  );
}

/** The search's answer: the follow-ups found, each linked. */
export function renderSearch(query: string, ids: readonly string[], path: string): string {
  const list = ids.length
    ? `<ul id="results">${ids.map((id) => `<li>${dispatchLink({ path }, id)}</li>`).join('')}</ul>`
    : `<p class="muted" id="results">Nothing found for <code>${esc(query)}</code> (a dispatch id, an idempotency key, or an agent job id with an open follow-up or a dead letter).</p>`;
  return shell('search', path, query, `<section><h2>Found ${ids.length}</h2>${list}</section>`);
}
