// The customer portal: one account's integrations in plain words. The link
// carries the account token in its fragment (#token=hkat_…), which browsers
// never send to a server; it moves to session storage and leaves the URL.
import { api, h, mount, session } from '/lib/hookd.js';

const main = document.getElementById('main');

function takeTokenFromLink() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    session.token = decodeURIComponent(m[1]);
    history.replaceState(null, '', location.pathname + location.search);
  }
}

async function render() {
  takeTokenFromLink();
  if (!session.token) {
    mount(main, h('h1', {}, 'Integration status'),
          h('p', {}, 'Open this page from the link you were given.'));
    return;
  }
  const list = await api('/v1/endpoints');
  mount(main, h('h1', {}, 'Integration status'),
        h('ul', {}, (list.data || []).map((e) => h('li', {}, e.url))));
}

render().catch((err) => mount(main, h('p', { class: 'error-box', role: 'alert' }, err.message)));
