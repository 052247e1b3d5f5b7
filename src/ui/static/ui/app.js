// The dashboard: a hash-routed page per view (#/overview, #/endpoints, …); each
// view loads at most one API page and renders with the DOM builder of lib/hookd.js.
import { api, h, mount, session, ApiError } from '/lib/hookd.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const logout = document.getElementById('logout');

const views = {
  overview: { title: 'Overview', render: renderOverview },
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

async function renderOverview() {
  const s = await api('/v1/summary');
  return [h('h1', {}, 'Overview'), h('pre', {}, JSON.stringify(s, null, 2))];
}

async function route() {
  if (!session.token) {
    nav.hidden = logout.hidden = true;
    mount(main, loginForm());
    return;
  }
  nav.hidden = logout.hidden = false;
  const [name] = location.hash.replace(/^#\/?/, '').split('/');
  const view = views[name] || views.overview;
  mount(nav, Object.entries(views).map(([k, v]) =>
    h('a', { href: `#/${k}`, 'aria-current': v === view ? 'page' : null }, v.title)));
  document.title = `${view.title} · hookd`;
  try {
    mount(main, await view.render());
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      session.token = null;
      mount(main, loginForm('Your session has ended; log in again.'));
      return;
    }
    mount(main, h('p', { class: 'error-box', role: 'alert' }, err.message));
  }
}

logout.addEventListener('click', () => { session.token = null; location.hash = ''; route(); });
window.addEventListener('hashchange', route);
route();
