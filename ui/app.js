// Convoy's web UI: one document, and this script draws the page its path names (/jobs,
// /jobs/ID, /queue, /workers, /login). Every string from the API goes into the page as text
// (textContent, text nodes, attribute properties), never as HTML: this file has no
// innerHTML. Live pages keep one event stream each (/api/events, /api/jobs/ID/events) and
// fetch their list again when the server says it changed.
'use strict';

(() => {
  let session = null; // GET /api/session: user, role, csrf, may
  const main = document.getElementById('main');
  const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED']);
  const STATES = ['PENDING', 'SCHEDULED', 'RENDEZVOUS', 'RUNNING', 'RESTARTING', 'SUCCEEDED',
    'FAILED', 'CANCELLED'];

  // ---- DOM: h('tag.class', {props}, children...): strings become text nodes.
  function h(spec, props, ...children) {
    const [tag, ...classes] = spec.split('.');
    const el = document.createElement(tag || 'div');
    if (classes.length) el.className = classes.join(' ');
    for (const [k, v] of Object.entries(props || {})) {
      if (v == null || v === false) continue;
      if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k in el && k !== 'list') el[k] = v;
      else el.setAttribute(k, String(v));
    }
    append(el, children);
    return el;
  }
  function append(el, children) {
    for (const c of children.flat(Infinity)) {
      if (c == null || c === false) continue;
      el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }
  function replace(el, ...children) {
    el.textContent = '';
    return append(el, children);
  }
  function toast(text, bad) {
    const t = document.getElementById('toast');
    t.textContent = text;
    t.className = bad ? 'bad' : '';
    t.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { t.hidden = true; }, 5000);
  }

  // ---- the API
  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }
  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    if (method !== 'GET') {
      headers['Content-Type'] = 'application/json';
      if (session) headers['X-CSRF-Token'] = session.csrf;
    }
    const r = await fetch(path, {
      method, headers, credentials: 'same-origin', cache: 'no-store',
      body: method === 'GET' ? undefined : JSON.stringify(body || {}),
    });
    let data = null;
    try { data = await r.json(); } catch (e) { data = null; }
    if (!r.ok) {
      if (r.status === 401 && path !== '/api/login') toLogin('Your session ended: log in again.');
      throw new ApiError(r.status, (data && data.error) || `${r.status} ${r.statusText}`);
    }
    return data;
  }
  function toLogin(why) {
    if (why) sessionStorage.setItem('convoy-login-why', why);
    const next = location.pathname === '/login' ? '/jobs' : location.pathname + location.search;
    location.replace('/login?next=' + encodeURIComponent(next));
  }
  // A live stream; `handlers` by event name. "end" closes it; a "stop" from the server (the
  // session ended, the token was revoked) closes it and checks the session.
  function stream(path, handlers) {
    const es = new EventSource(path);
    for (const [name, fn] of Object.entries(handlers)) {
      es.addEventListener(name, (e) => fn(JSON.parse(e.data)));
    }
    // The stream's natural end (a job that finished): no reconnect.
    es.addEventListener('end', () => es.close());
    es.addEventListener('stop', (e) => {
      es.close();
      let why = 'The live updates stopped.';
      try { why = JSON.parse(e.data).error || why; } catch (err) { /* keep */ }
      api('GET', '/api/session').then(() => toast(why, true)).catch(() => {});
    });
    es.addEventListener('error', () => {
      // The browser retries by itself while the server is away; a refusal (401, 429) ends it.
      if (es.readyState === EventSource.CLOSED) {
        api('GET', '/api/session').catch(() => {});
      }
    });
    window.addEventListener('pagehide', () => es.close());
    return es;
  }

  // ---- formatting
  const num = (v) => (v == null || v === '' ? 0 : Number(v));
  function clock(ms) {
    if (!num(ms)) return '-';
    const d = new Date(num(ms));
    const today = new Date().toDateString() === d.toDateString();
    return today ? d.toLocaleTimeString() : d.toLocaleString();
  }
  function age(ms) {
    if (!num(ms)) return '-';
    let s = Math.max(0, Math.round((Date.now() - num(ms)) / 1000));
    if (s < 60) return `${s}s`;
    const d = Math.floor(s / 86400); s %= 86400;
    const hr = Math.floor(s / 3600); s %= 3600;
    const m = Math.floor(s / 60); s %= 60;
    if (d) return `${d}d ${hr}h`;
    if (hr) return `${hr}h ${m}m`;
    return `${m}m ${s}s`;
  }
  function bytes(n) {
    n = num(n);
    if (!n) return '0';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return `${n.toFixed(n < 10 && i ? 1 : 0)} ${u[i]}`;
  }
  function badge(state) {
    const s = STATES.includes(state) ? state : 'UNKNOWN';
    return h(`span.badge.state-${s.toLowerCase()}`, {}, String(state || '-'));
  }
  const procs = (spec) => (spec && spec.procs_per_node_gpu ? 'gpu' : String(num(spec && spec.procs_per_node) || 1));
  const nodes = (spec) => (spec ? (num(spec.min_nodes) && num(spec.max_nodes)
    ? `${spec.min_nodes}-${spec.max_nodes}` : String(num(spec.nodes) || 1)) : '-');
  const mine = (job) => session.may.all_jobs || job.owner === session.user;
  const jobLink = (id) => h('a', { href: `/jobs/${encodeURIComponent(id)}` }, id);

  // ---- pages
  async function loginPage() {
    document.getElementById('nav-jobs').parentElement.hidden = true;
    const params = new URLSearchParams(location.search);
    const next = params.get('next') || '/jobs';
    // Only a page of this UI (never another site, "//host" or "/\\host").
    const safeNext = /^\/(jobs(\/[A-Za-z0-9._-]+)?|queue|workers)(\?[A-Za-z0-9._=&,%-]*)?$/.test(next) ? next : '/jobs';
    const message = h('p.error', { id: 'login-error', hidden: true });
    const why = sessionStorage.getItem('convoy-login-why');
    sessionStorage.removeItem('convoy-login-why');
    const done = () => location.replace(safeNext);
    const fail = (e) => { message.hidden = false; message.textContent = e.message; };
    const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off',
      placeholder: 'cvy_…', required: true, size: 50 });
    const form = h('form', {
      id: 'login-form',
      onsubmit: (e) => {
        e.preventDefault();
        api('POST', '/api/login', { token: input.value.trim() }).then(done, fail);
      },
    }, h('label', { htmlFor: 'token' }, 'Token'), ' ', input, ' ', h('button', { type: 'submit' }, 'Log in'));
    replace(main, h('section.login', {},
      h('h1', {}, 'Log in to Convoy'),
      why ? h('p.notice', {}, why) : null,
      h('p', {}, 'Run ', h('code', {}, 'convoy ui'), ' for a one-time login link, or paste a token ',
        '(', h('code', {}, 'convoy-coordinator token create'), '). The browser keeps a session, never the token.'),
      form, message));
    // A login link: its code is in the fragment (never sent to a server in a URL); it leaves
    // the address bar at once.
    const code = new URLSearchParams(location.hash.slice(1)).get('code');
    if (code) {
      history.replaceState(null, '', location.pathname + location.search);
      api('POST', '/api/login', { code }).then(done, fail);
    }
  }

  function header() {
    const who = document.getElementById('who');
    replace(who, session.user, ' ', h('span.role', {}, session.role));
    const out = document.getElementById('logout');
    out.hidden = session.insecure;
    out.onclick = () => api('POST', '/api/logout').finally(() => location.replace('/login'));
    for (const p of ['jobs', 'queue', 'workers']) {
      const a = document.getElementById(`nav-${p}`);
      if (location.pathname === `/${p}` || location.pathname.startsWith(`/${p}/`)) a.className = 'current';
    }
  }

  // Refetches at most once a second, however often the server says something changed.
  function throttled(fn) {
    let running = false, again = false;
    const run = async () => {
      if (running) { again = true; return; }
      running = true;
      try { await fn(); } catch (e) { if (!(e instanceof ApiError && e.status === 401)) toast(e.message, true); }
      setTimeout(() => { running = false; if (again) { again = false; run(); } }, 1000);
    };
    return run;
  }

  async function jobsPage() {
    const params = new URLSearchParams(location.search);
    const state = params.get('state') || '';
    const owner = params.get('owner') || '';
    const tokens = [params.get('page_token') || '']; // the pages visited, for "newer"
    const stateSelect = h('select', { id: 'filter-state', name: 'state' },
      h('option', { value: '' }, 'every state'),
      STATES.map((s) => h('option', { value: s, selected: s === state }, s)),
      h('option', { value: 'PENDING,SCHEDULED,RENDEZVOUS,RUNNING,RESTARTING', selected: state.includes(',') }, 'not finished'));
    const ownerInput = h('input', { id: 'filter-owner', name: 'owner', value: owner, placeholder: 'owner', size: 12 });
    const form = h('form.filters', {
      onsubmit: (e) => {
        e.preventDefault();
        const q = new URLSearchParams();
        if (stateSelect.value) q.set('state', stateSelect.value);
        if (ownerInput.value.trim()) q.set('owner', ownerInput.value.trim());
        location.assign('/jobs' + (q.toString() ? `?${q}` : ''));
      },
    }, stateSelect, ' ', ownerInput, ' ', h('button', { type: 'submit' }, 'Filter'),
    session.user !== 'local' ? [' ', h('a', { href: `/jobs?owner=${encodeURIComponent(session.user)}` }, 'mine')] : null);
    const body = h('tbody', { id: 'jobs-body' });
    const newer = h('button', { type: 'button', id: 'newer', disabled: true }, '← newer');
    const older = h('button', { type: 'button', id: 'older', disabled: true }, 'older →');
    const count = h('span.muted', {});
    replace(main, h('h1', {}, 'Jobs'), form,
      h('table.list', { id: 'jobs' }, h('thead', {}, h('tr', {},
        ['ID', 'Name', 'Owner', 'State', 'Nodes×procs', 'Submitted', 'Updated', 'Message'].map((c) => h('th', {}, c)))), body),
      h('div.pager', {}, newer, ' ', older, ' ', count));
    let next = '';
    const load = async () => {
      const q = new URLSearchParams({ limit: '50' });
      if (state) q.set('state', state);
      if (owner) q.set('owner', owner);
      if (tokens[tokens.length - 1]) q.set('page_token', tokens[tokens.length - 1]);
      const page = await api('GET', `/api/jobs?${q}`);
      next = page.next_page_token || '';
      replace(body, (page.jobs || []).map((j) => h('tr', { dataset: { job: j.id } },
        h('td', {}, jobLink(j.id)), h('td', {}, j.spec.name), h('td', {}, j.owner || '-'),
        h('td', {}, badge(j.state)), h('td', {}, `${nodes(j.spec)}×${procs(j.spec)}`),
        h('td', { title: clock(j.created_unix_ms) }, age(j.created_unix_ms) + ' ago'),
        h('td', {}, clock(j.updated_unix_ms)),
        h('td.message', {}, j.state === 'PENDING' && j.pending_reason ? j.pending_reason : j.message))));
      if (!(page.jobs || []).length) replace(body, h('tr', {}, h('td.muted', { colSpan: 8 }, 'No jobs.')));
      newer.disabled = tokens.length <= 1;
      older.disabled = !next;
      count.textContent = `page ${tokens.length}`;
    };
    newer.onclick = () => { tokens.pop(); load(); };
    older.onclick = () => { tokens.push(next); load(); };
    const refresh = throttled(load);
    await load();
    stream('/api/events', { changed: () => refresh() });
  }

  async function queuePage() {
    const body = h('tbody', { id: 'queue-body' });
    replace(main, h('h1', {}, 'Queue'),
      h('p.muted', {}, 'Waiting jobs in the order they will start, and why each waits.'),
      h('table.list', { id: 'queue' }, h('thead', {}, h('tr', {},
        ['#', 'ID', 'Name', 'Owner', 'Priority', 'Nodes×procs', 'Waited', 'Starts by', 'Why it waits'].map((c) => h('th', {}, c)))), body));
    const load = async () => {
      const page = await api('GET', '/api/queue');
      const jobs = page.jobs || [];
      replace(body, jobs.length ? jobs.map((j) => h('tr', { dataset: { job: j.id } },
        h('td', {}, num(j.queue_position) || '-'), h('td', {}, jobLink(j.id)), h('td', {}, j.spec.name),
        h('td', {}, j.owner || '-'), h('td', {}, num(j.spec.priority)),
        h('td', {}, `${nodes(j.spec)}×${procs(j.spec)}`), h('td', {}, age(j.created_unix_ms)),
        h('td', {}, num(j.estimated_start_unix_ms) ? clock(j.estimated_start_unix_ms) : '-'),
        h('td.message', {}, j.pending_reason || '-')))
        : h('tr', {}, h('td.muted', { colSpan: 9 }, 'Nothing waits.')));
    };
    const refresh = throttled(load);
    await load();
    stream('/api/events', { changed: () => refresh() });
  }

  // A worker's health check verdict (README "When nodes are sick"), its reason on hover.
  function healthBadge(w) {
    const state = (w.health && w.health.state) || '';
    if (state === 'HEALTH_FAILING') {
      return [' ', h('span.badge.unhealthy', { title: w.health.reason || '' }, 'UNHEALTHY')];
    }
    if (state === 'HEALTH_CHECKING') return [' ', h('span.badge.checking', {}, 'CHECKING')];
    return null;
  }

  async function workersPage() {
    const body = h('tbody', { id: 'workers-body' });
    const cols = ['Name', 'State', 'Slots', 'Cores', 'Memory', 'GPUs', 'Labels', 'Heartbeat', 'Jobs'];
    if (session.may.drain) cols.push('');
    replace(main, h('h1', {}, 'Workers'), h('table.list', { id: 'workers' },
      h('thead', {}, h('tr', {}, cols.map((c) => h('th', {}, c)))), body));
    let workers = [];
    const beats = [];
    const render = () => {
      beats.length = 0;
      replace(body, workers.length ? workers.map((w) => {
        const state = String(w.state || '').replace('WORKER_', '');
        const beat = h('td', {}, age(w.last_heartbeat_unix_ms) + ' ago');
        beats.push([beat, w.last_heartbeat_unix_ms]);
        const labels = Object.entries(w.labels || {}).map(([k, v]) => `${k}=${v}`).join(', ');
        const gpus = (w.gpus || []).length ? `${(w.used_gpus || []).length}/${w.gpus.length}` : '-';
        const row = h('tr', { dataset: { worker: w.name } },
          h('td', {}, w.name), h('td', {}, h(`span.badge.worker-${state.toLowerCase()}`, {}, state),
            w.drained ? [' ', h('span.badge.drained', { title: `by ${w.drained_by || '-'} at ${clock(w.drained_unix_ms)}` }, 'DRAINED')] : null,
            healthBadge(w),
            w.cordoned ? [' ', h('span.badge.cordoned', { title: `by ${w.cordoned_by || '-'}: ${w.cordon_reason || ''}` }, 'CORDONED')] : null),
          h('td', {}, `${num(w.used_slots)}/${num(w.slots)}`), h('td', {}, `${num(w.used_cpus)}/${num(w.cores)}`),
          h('td', {}, `${bytes(w.used_memory_bytes)} / ${bytes(w.memory_bytes)}`), h('td', {}, gpus),
          h('td', {}, labels || '-'), beat,
          h('td', {}, (w.jobs || []).map((id, i) => [i ? ', ' : '', jobLink(id)])));
        if (session.may.drain) {
          const drain = !w.drained;
          row.appendChild(h('td', {}, h('button', {
            type: 'button', className: drain ? 'drain' : 'undrain',
            onclick: async (e) => {
              e.target.disabled = true;
              try {
                await api('POST', `/api/workers/${encodeURIComponent(w.name)}/${drain ? 'drain' : 'undrain'}`);
                toast(`${w.name} ${drain ? 'drained: no new jobs start there' : 'undrained'}`);
                await load();
              } catch (err) { toast(err.message, true); e.target.disabled = false; }
            },
          }, drain ? 'Drain' : 'Undrain')));
        }
        return row;
      }) : h('tr', {}, h('td.muted', { colSpan: cols.length }, 'No workers.')));
    };
    const load = async () => {
      workers = (await api('GET', '/api/workers')).workers || [];
      render();
    };
    setInterval(() => { for (const [td, ms] of beats) td.textContent = age(ms) + ' ago'; }, 1000);
    const refresh = throttled(load);
    await load();
    stream('/api/events', { changed: () => refresh() });
  }

  // ---- the job page
  async function jobPage(id) {
    const head = h('div.job-head', {});
    const summary = h('dl.summary', {});
    const ranks = h('tbody', { id: 'ranks-body' });
    const failures = h('div', { id: 'failures' });
    const events = h('tbody', { id: 'events-body' });
    const charts = {
      loss: new ConvoyCharts.SeriesChart(h('div.chart', { id: 'chart-loss' }), 'loss', 'loss'),
      rate: new ConvoyCharts.SeriesChart(h('div.chart', { id: 'chart-rate' }), 'samples/s', 'samples/s',
        (v) => (v == null ? '-' : v.toFixed(0))),
      acc: new ConvoyCharts.SeriesChart(h('div.chart', { id: 'chart-accuracy' }), 'test accuracy', 'accuracy',
        (v) => (v == null ? '-' : `${(v * 100).toFixed(2)}%`), true, [0, 1]),
    };
    const logs = h('section', { id: 'logs' });
    replace(main, head, summary,
      h('h2', {}, 'Progress'), h('table.list', { id: 'ranks' }, h('thead', {}, h('tr', {},
        ['Rank', 'Attempt', 'Epoch', 'Step', 'Loss', 'Samples/s', 'Reported'].map((c) => h('th', {}, c)))), ranks),
      h('div.charts', {}, charts.loss.el, charts.rate.el, charts.acc.el),
      h('h2', {}, 'Failures'), failures,
      h('h2', {}, 'Events'), h('table.list', { id: 'events' }, h('thead', {}, h('tr', {},
        ['Time', 'Attempt', 'From', 'To', 'Reason'].map((c) => h('th', {}, c)))), events),
      logs);
    window.addEventListener('resize', () => Object.values(charts).forEach((c) => c.resize()));

    // The job and its metric history (in columns) at once.
    const [first, series] = await Promise.all([api('GET', `/api/jobs/${encodeURIComponent(id)}`),
      api('GET', `/api/jobs/${encodeURIComponent(id)}/series`)]);
    let job = first;
    document.title = `${job.id} ${job.spec.name} · Convoy`;
    const latest = new Map(); // rank -> latest MetricRecord
    const renderJob = () => {
      renderHead(head, job);
      renderSummary(summary, job);
      renderFailures(failures, job);
      replace(events, (job.events || []).slice().reverse().map(eventRow));
      for (const m of job.latest || []) latest.set(num(m.rank), m);
      renderRanks(ranks, latest);
    };
    renderJob();
    renderLogs(logs, job);

    for (const r of series.ranks || []) {
      const { rank, step, loss, samples_per_second: rate, eval_step: evalStep, test_accuracy: acc } = r;
      for (let i = 0; i < step.length; i++) {
        if (loss[i] !== null) charts.loss.add(rank, step[i], loss[i]);
        if (rate[i] !== null) charts.rate.add(rank, step[i], rate[i]);
      }
      for (let i = 0; i < evalStep.length; i++) {
        if (acc[i] !== null) charts.acc.add(rank, evalStep[i], acc[i]);
      }
    }
    Object.values(charts).forEach((c) => c.draw());
    // The first render is complete (bench/ui_render.py reads this mark).
    performance.mark('convoy-job-rendered');
    document.body.dataset.rendered = '1';

    if (TERMINAL.has(job.state)) return;
    stream(`/api/jobs/${encodeURIComponent(id)}/events`, {
      job: (j) => { job = j; renderJob(); },
      event: (e) => { job.events = (job.events || []).concat([e]); events.insertBefore(eventRow(e), events.firstChild); },
      metric: (m) => {
        const rank = num(m.rank), step = num(m.step), v = m.values || {};
        latest.set(rank, m);
        renderRanks(ranks, latest);
        if (v.test_accuracy != null) charts.acc.add(rank, step, num(v.test_accuracy));
        else {
          if (m.has_loss) charts.loss.add(rank, step, num(m.loss));
          if (v.samples_per_s != null) charts.rate.add(rank, step, num(v.samples_per_s));
        }
      },
    });
  }

  function renderHead(el, job) {
    // The same state again (a snapshot after an event): nothing to redraw, and a button the
    // user is about to press stays where it is.
    const key = JSON.stringify([job.state, job.message, job.pending_reason]);
    if (el.dataset.key === key) return;
    el.dataset.key = key;
    const actions = h('span.actions', {});
    if (session.may.cancel && mine(job)) {
      if (!TERMINAL.has(job.state)) {
        actions.appendChild(h('button.danger', { type: 'button', id: 'cancel', onclick: async (e) => {
          if (!confirm(`Cancel ${job.id}?`)) return;
          e.target.disabled = true;
          try { await api('POST', `/api/jobs/${encodeURIComponent(job.id)}/cancel`); toast(`${job.id} cancelled`); } catch (err) { toast(err.message, true); e.target.disabled = false; }
        } }, 'Cancel'));
      } else {
        actions.appendChild(h('button.danger', { type: 'button', id: 'delete', onclick: async (e) => {
          if (!confirm(`Delete ${job.id} for good (its record, logs, checkpoints)?`)) return;
          e.target.disabled = true;
          try { await api('POST', `/api/jobs/${encodeURIComponent(job.id)}/delete`); location.assign('/jobs'); } catch (err) { toast(err.message, true); e.target.disabled = false; }
        } }, 'Delete'));
      }
    }
    replace(el, h('h1', {}, h('span.muted', {}, job.id), ' ', job.spec.name, ' ', h('span', { id: 'job-state' }, badge(job.state))), actions,
      h('p.message', { id: 'job-message' }, job.state === 'PENDING' && job.pending_reason ? `waiting: ${job.pending_reason}` : job.message));
  }

  function renderSummary(el, job) {
    const spec = job.spec || {};
    const cmd = (spec.command || []).length ? spec.command.join(' ')
      : spec.trainer ? `convoy-trainer ${spec.trainer.model || ''}` : '-';
    const attempt = (job.attempts || [])[(job.attempts || []).length - 1];
    const placement = attempt ? (attempt.nodes || []).map((n) => `${n.worker} (ranks ${(n.ranks || []).join(',')})`).join('; ') : '';
    const env = Object.entries(spec.env || {}).map(([k, v]) => `${k}=${v}`).join(' ');
    const rows = [
      ['Owner', job.owner || '-'], ['Submitted', clock(job.created_unix_ms)],
      ['Nodes × procs', `${nodes(spec)} × ${procs(spec)}`], ['Command', cmd],
      ['Attempt', `${num(job.attempt)} (restarts ${num(job.restarts)} of ${num(spec.max_restarts)})`],
      ['Placement', placement || '-'], ['Environment', env || '-'],
    ];
    replace(el, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
  }

  function renderRanks(el, latest) {
    const rows = [...latest.entries()].sort((a, b) => a[0] - b[0]).map(([rank, m]) => {
      const v = m.values || {};
      return h('tr', {}, h('td', {}, rank), h('td', {}, num(m.attempt)), h('td', {}, num(m.epoch)), h('td', {}, num(m.step)),
        h('td', {}, m.has_loss ? num(m.loss).toFixed(4) : '-'),
        h('td', {}, v.samples_per_s != null ? num(v.samples_per_s).toFixed(0) : '-'), h('td', {}, clock(m.time_unix_ms)));
    });
    replace(el, rows.length ? rows : h('tr', {}, h('td.muted', { colSpan: 7 }, 'No rank has reported yet.')));
  }

  function renderFailures(el, job) {
    const failed = (job.attempts || []).filter((a) => a.failure && a.failure.reason);
    if (!failed.length) {
      replace(el, h('p.muted', {}, 'None.'));
      return;
    }
    replace(el, failed.map((a) => {
      const f = a.failure, x = f.exit || {};
      return h('div.failure', { dataset: { attempt: num(a.attempt) } },
        h('p', {}, h('strong', {}, `Attempt ${num(a.attempt)}: `), h('span.root-cause', {}, f.reason)),
        h('p.muted', {}, String(f.cause || '').replace('FAILURE_', '').toLowerCase().replace('_', ' '),
          x.exit_code ? ` · exit code ${x.exit_code}` : '', x.signal_name ? ` · ${x.signal_name}` : ''),
        x.error_type || x.error_message ? h('p', {}, h('code', {}, `${x.error_type || ''}: ${x.error_message || ''}`)) : null,
        (x.stderr_tail || []).length ? h('pre.stderr', {}, x.stderr_tail.join('\n')) : null,
        x.error_traceback ? h('pre.stderr', {}, x.error_traceback) : null);
    }));
  }

  function eventRow(e) {
    return h('tr', {}, h('td', {}, clock(e.time_unix_ms)), h('td', {}, num(e.attempt)),
      h('td', {}, e.from === 'JOB_STATE_UNSPECIFIED' ? '' : e.from), h('td', {}, e.to === 'JOB_STATE_UNSPECIFIED' ? '' : e.to),
      h('td.message', {}, e.reason));
  }

  function renderLogs(el, job) {
    if (!(session.may.logs && mine(job))) {
      replace(el, h('h2', {}, 'Logs'), h('p.muted', {}, 'A job\u2019s logs are for its owner and admins.'));
      return;
    }
    const world = Math.max(1, ...(job.attempts || []).flatMap((a) => (a.nodes || []).flatMap((n) => n.ranks || [])).map((r) => num(r) + 1));
    const rank = h('select', { id: 'log-rank' }, Array.from({ length: world }, (_, r) => h('option', { value: r }, `rank ${r}`)));
    const follow = h('input', { type: 'checkbox', id: 'log-follow', checked: !TERMINAL.has(job.state) });
    const out = h('pre.log', { id: 'log' });
    let es = null;
    const open = () => {
      if (es) es.close();
      out.textContent = '';
      const q = new URLSearchParams({ rank: rank.value });
      if (follow.checked) q.set('follow', '1');
      es = new EventSource(`/api/jobs/${encodeURIComponent(job.id)}/logs?${q}`);
      es.addEventListener('log', (e) => {
        const atBottom = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
        out.appendChild(document.createTextNode(JSON.parse(e.data).data));
        if (atBottom) out.scrollTop = out.scrollHeight;
      });
      es.addEventListener('end', () => es.close());
      es.addEventListener('stop', (e) => { es.close(); out.appendChild(h('span.error', {}, `\n${JSON.parse(e.data).error}`)); });
      es.addEventListener('error', () => { if (es.readyState === EventSource.CLOSED && !out.textContent) out.textContent = '(no log)'; });
    };
    rank.onchange = open;
    follow.onchange = open;
    replace(el, h('h2', {}, 'Logs'), h('div.log-controls', {}, rank, ' ', h('label', {}, follow, ' follow')), out);
    open();
  }

  // ---- start
  async function start() {
    const path = location.pathname;
    if (path === '/login') return loginPage();
    try {
      session = await api('GET', '/api/session');
    } catch (e) {
      if (e.status !== 401) replace(main, h('p.error', {}, e.message));
      return;
    }
    header();
    try {
      if (path === '/jobs') await jobsPage();
      else if (path === '/queue') await queuePage();
      else if (path === '/workers') await workersPage();
      else if (path.startsWith('/jobs/')) await jobPage(decodeURIComponent(path.slice(6)));
      else replace(main, h('p.error', {}, 'No such page.'));
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 401)) replace(main, h('p.error', { id: 'page-error' }, e.message));
    }
  }
  start();
})();
