// Drive the dashboard in headless Chromium (Debian's /usr/bin/chromium through playwright-core,
// which downloads no browser): sign in through the login form as a person would, check every
// page shows what an operator expects, check a viewer is not offered operator actions, sign out.
// Usage: node browser.mjs BASE_URL ADMIN_PASSWORD OUT_DIR CHECKS_JSON
// CHECKS_JSON: [{"path": "/nodes", "want": ["text", ...]}, ...]
import { chromium } from "playwright-core";

const [base, password, out, checksJson] = process.argv.slice(2);
const checks = JSON.parse(checksJson);
let pass = 0, fail = 0;
const ok = (cond, what) => {
  if (cond) { pass++; } else { fail++; console.log(`FAIL ${what}`); }
};

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
const errors = [];
page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });

// Not signed in: every page sends you to the sign-in form, and you come back after it.
await page.goto(`${base}/nodes`);
ok(page.url().startsWith(`${base}/login`), `unauthenticated /nodes goes to /login (at ${page.url()})`);
await page.screenshot({ path: `${out}/login.png` });
// A wrong password says so and keeps you on the form.
await page.fill("#username", "admin");
await page.fill("#password", "definitely-wrong");
await page.click("#sign-in");
ok((await page.textContent("#login-message") || "").includes("Wrong user name or password"),
   "a wrong password is explained");
await page.fill("#password", password);
await page.click("#sign-in");
await page.waitForLoadState();
ok(page.url() === `${base}/nodes`, `after sign-in you are back on /nodes (at ${page.url()})`);
ok((await page.textContent(".sidebar-user") || "").includes("admin"), "the user is on the page");

for (const c of checks) {
  await page.goto(`${base}${c.path}`);
  const html = await page.content();
  const name = (c.path.replace(/^\//, "").replace(/\//g, "_")) || "overview";
  await page.screenshot({ path: `${out}/${name}.png`, fullPage: true });
  for (const want of c.want) { ok(html.includes(want), `${c.path} shows ${want}`); }
  ok(html.includes('class="badge badge-neutral user-role">admin<'), `${c.path} shows the role`);
}

// A node's BMC through its page: the form saves it, its password never comes back, and a
// destructive power button asks first (a dismissed question sends nothing). Nothing listens on
// the BMC's loopback port, so the action fails, and the page says so.
await page.goto(`${base}/nodes/1`);
await page.selectOption("#bmc-driver", "redfish");
await page.fill("#bmc-address", "http://127.0.0.1:9");
await page.fill("#bmc-user", "root");
await page.fill("#bmc-password", "browser-Secret-9");
await Promise.all([page.waitForNavigation(),
                   page.click('form[action="/nodes/1/bmc"] button[type="submit"]')]);
let html = await page.content();
ok(html.includes("BMC saved"), "the BMC form says it saved");
ok(!html.includes("browser-Secret-9"), "the BMC password is not on the page");
let asked = "";
page.once("dialog", (d) => { asked = d.message(); d.dismiss(); });
await page.click('button[data-confirm^="Power off"]');
ok(asked.startsWith("Power off"), `power off asks first (${asked})`);
ok(!(await page.content()).includes("Power off failed"), "a dismissed question sends nothing");
page.once("dialog", (d) => d.accept());
await Promise.all([page.waitForNavigation(), page.click('button[data-confirm^="Power off"]')]);
ok((await page.content()).includes("Power off failed"), "an accepted power off is tried, its failure shown");
await page.screenshot({ path: `${out}/node_power.png`, fullPage: true });
// Bulk power from the node list: a review of the ticked nodes first, then a line per node that
// failed.
await page.goto(`${base}/nodes`);
await page.check('input[name="nodes"][value="1"]');
await page.selectOption("#bulk-power", "off");
await Promise.all([page.waitForNavigation(), page.click('button[name="do"][value="power"]')]);
ok(page.url().startsWith(`${base}/nodes/bulk`) && await page.locator("ul.named li").count() === 1, "bulk power reviews the ticked node first");
await Promise.all([page.waitForNavigation(), page.click("form.review button[type=submit]")]);
const powered = await page.textContent("#notice");
ok(/Power off: 0 done\. 1 not:/.test(powered), `bulk power says what failed, node by node (${powered})`);
await page.screenshot({ path: `${out}/nodes_power.png`, fullPage: true });

// An API token made on the Account page is shown once.
await page.goto(`${base}/account`);
await page.fill('input[name="name"]', "browser-ci");
await page.click('form[action="/account/tokens"] button[type="submit"]');
const shown = await page.textContent("#new-token code");
ok(/^skt_[0-9a-f]{64}$/.test(shown || ""), "the new token is shown once");
await page.screenshot({ path: `${out}/account.png`, fullPage: true });
await page.reload();
ok(!(await page.content()).includes(shown), "a reload does not show it again");

// Sign out: the session is gone.
await page.click(".sidebar-user button");
await page.waitForLoadState();
ok(page.url().startsWith(`${base}/login`), "signing out lands on the sign-in page");
await page.goto(`${base}/`);
ok(page.url().startsWith(`${base}/login`), "after signing out pages need a sign-in again");
ok(errors.length === 0, `no console errors (${errors.join("; ")})`);

await browser.close();
console.log(`browser: ${pass} passed, ${fail} failed`);
process.exit(fail === 0 ? 0 : 1);
