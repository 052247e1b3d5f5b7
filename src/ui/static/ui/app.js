// The dashboard: a hash-routed page per view (#/overview, #/endpoints/ID, …);
// each view loads at most one API page and renders with the DOM builder of
// lib/hookd.js. A view gets a context: its route's args and params, every()
// for a refresh that stops when the reader leaves, and rerender().
import { api, h, mount, session, ApiError, visible } from '/lib/hookd.js';
import { currentRoute, announce } from './common.js';
import { renderOverview } from './overview.js';
import { renderEndpoints, renderEndpoint } from './endpoints.js';
import { renderEvents, renderEvent } from './events.js';
import { renderDead, renderReplays } from './dead.js';
import { renderInbound, renderInboxItem, renderTrace } from './inbound.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const logout = document.getElementById('logout');

// name → view; `list` the one to render without an argument, `one` with (#/endpoints/ID).
const views = {
  overview: { title: 'Overview', list: renderOverview },
  endpoints: { title: 'Endpoints', list: renderEndpoints, one: renderEndpoint },
  events: { title: 'Events', list: renderEvents, one: renderEvent },
  dead: { title: 'Dead letters', list: renderDead },
  replays: { title: 'Replays', list: renderReplays, one: renderReplays },
  inbound: { title: 'Inbound', list: renderInbound },
  inbox: { title: 'Inbound', nav: false, one: renderInboxItem, list: renderInbound },
  trace: { title: 'Entity trace', list: renderTrace },
};

function loginForm(message) {
  const input = h('input', { id: 'token', type: 'password', autocomplete: 'current-password', required: true });
  const form = h('form', { class: 'login', onsubmit: async (e) => {
    e.preventDefault();
    session.token = input.value.trim();
    try {
      await api('/v1/summary');
      route();
    } catch (err) {
      session.token = null;
      mount(main, loginForm(err instanceof ApiError && err.status === 401 ? 'That token is not valid.' : err.message));
    }
  } },
  h('h1', {}, 'Log in to hookd'),
  h('label', { for: 'token' }, 'Admin token'), input,
  message ? h('p', { class: 'error-box', role: 'alert' }, message) : null,
  h('button', { class: 'primary', type: 'submit' }, 'Log in'));
  queueMicrotask(() => input.focus());
  return form;
}

let generation = 0;
let timers = [];

function stopTimers() {
  for (const t of timers) clearInterval(t);
  timers = [];
}

async function route({ keepFocus = false } = {}) {
  stopTimers();
  const mine = ++generation;
  if (!session.token) {
    nav.hidden = logout.hidden = true;
    mount(main, loginForm());
    return;
  }
  nav.hidden = logout.hidden = false;
  const r = currentRoute();
  const view = views[r.name] || views.overview;
  const render = r.args.length && view.one ? view.one : view.list;
  mount(nav, Object.entries(views).filter(([, v]) => v.nav !== false).map(([k, v]) =>
    h('a', { href: `#/${k}`, 'aria-current': v === view || (view.nav === false && v.title === view.title) ? 'page' : null },
      v.title)));
  document.title = `${view.title} · hookd`;
  const ctx = {
    args: r.args, params: r.params,
    alive: () => mine === generation,
    every: (ms, fn) => {
      let busy = false;
      const id = setInterval(async () => {
        if (busy || mine !== generation) return;
        busy = true;
        try { await fn(); } finally { busy = false; }
      }, ms);
      timers.push(id);
    },
    rerender: () => (mine === generation ? route({ keepFocus: true }) : Promise.resolve()),
  };
  if (!keepFocus) announce(null);
  main.setAttribute('aria-busy', 'true');
  try {
    const nodes = await render(ctx);
    if (mine !== generation) return;
    const x = window.scrollX, y = window.scrollY;
    const active = document.activeElement;
    const key = keepFocus && active && main.contains(active)
      ? (active.id ? `#${CSS.escape(active.id)}` : active.dataset.key ? `[data-key="${CSS.escape(active.dataset.key)}"]` : null)
      : null;
    mount(main, nodes);
    if (keepFocus) {
      window.scrollTo(x, y);
      const again = key && main.querySelector(key);
      if (again) again.focus({ preventScroll: true });
      else main.focus({ preventScroll: true });
    } else if (navigated) {
      main.querySelector('h1')?.focus();
    }
  } catch (err) {
    if (mine !== generation) return;
    if (err instanceof ApiError && err.status === 401) {
      session.token = null;
      nav.hidden = logout.hidden = true;
      mount(main, loginForm('Your session has ended; log in again.'));
      return;
    }
    mount(main, h('h1', { tabindex: '-1' }, view.title),
      h('p', { class: 'error-box', role: 'alert' }, err.status === 404 ? 'Not found: ' : '', visible(err.message)));
  } finally {
    if (mine === generation) main.removeAttribute('aria-busy');
  }
}

// Focus goes to the new page's heading when the reader navigated (not at the first load).
let navigated = false;
// The skip link moves focus without touching the route.
document.querySelector('.skip').addEventListener('click', (e) => { e.preventDefault(); main.focus(); });
logout.addEventListener('click', () => { session.token = null; location.hash = ''; route(); });
window.addEventListener('hashchange', () => { navigated = true; route(); });
route();
