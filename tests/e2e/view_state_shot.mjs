// Opens NiFi's View State dialog of one processor the way a user does, and takes a screenshot of it
// (for tests/e2e/test_canvas_screenshot.py). Drives the system Chromium with puppeteer-core, which it installs
// on first use into tests/e2e/.work/puppeteer/ (npm, not committed).
//
//   node tests/e2e/view_state_shot.mjs <canvas url> <processor id> <out.png> [width height]
//
// Loads the canvas (http://127.0.0.1:<port>/nifi/#/process-groups/<id>), right-clicks the processor's box
// (the SVG group id="id-<processor id>"), clicks "View State" in the context menu, waits until the Component
// State dialog lists a shard ("shardId-" in a row), and writes the screenshot of the page to <out.png>.
// Prints one line of JSON: {"text": the dialog's innerText, "menu": the context menu's items}. Any step that
// fails exits 1 with a message naming the step, and leaves what the page looked like in <out>.failed.png.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const PUPPETEER = "puppeteer-core@25.16.0";
const CHROMIUM = process.env.KINESNOW_CHROMIUM || "/usr/bin/chromium";
const WORK = join(dirname(fileURLToPath(import.meta.url)), ".work", "puppeteer");
const MODULE = join(WORK, "node_modules", "puppeteer-core", "lib", "puppeteer", "puppeteer-core.js");

const [url, processorId, out, width = "1600", height = "1000"] = process.argv.slice(2);
if (!url || !processorId || !out) {
    console.error("usage: node view_state_shot.mjs <canvas url> <processor id> <out.png> [width height]");
    process.exit(2);
}

function fail(step, error) {
    console.error(`view_state_shot: ${step}: ${error && error.message ? error.message : error}`);
    process.exit(1);
}

if (!existsSync(MODULE)) {
    mkdirSync(WORK, { recursive: true });
    // Run inside WORK (a package of its own), not with --prefix: --prefix also moves npm's global config
    // (<prefix>/etc/npmrc), and with it the machine's registry and CA settings.
    writeFileSync(join(WORK, "package.json"), '{"name": "kinesnow-view-state-shot", "private": true}\n');
    try {
        execFileSync("npm", ["install", "--no-save", "--no-audit", "--no-fund", PUPPETEER],
            { cwd: WORK, stdio: ["ignore", process.stderr, process.stderr], timeout: 300_000 });
    } catch (e) {
        fail(`installing ${PUPPETEER} with npm into ${WORK}`, e);
    }
}
const puppeteer = (await import(pathToFileURL(MODULE).href)).default;

let browser;
try {
    browser = await puppeteer.launch({
        executablePath: CHROMIUM,
        headless: true,
        args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--hide-scrollbars"],
        defaultViewport: { width: Number(width), height: Number(height) },
    });
} catch (e) {
    fail(`starting ${CHROMIUM}`, e);
}

const page = await browser.newPage();
let step = "";
async function run(name, action) {
    step = name;
    return await action();
}

try {
    await run(`loading ${url}`, () => page.goto(url, { waitUntil: "networkidle2", timeout: 60_000 }));

    const box = `[id="id-${processorId}"]`;
    await run(`waiting for the processor ${box} on the canvas`,
        () => page.waitForSelector(box, { visible: true, timeout: 60_000 }));
    // Its body rectangle: the box as drawn, where a right-click selects the processor and opens its menu.
    const target = await run("finding the processor's body", async () => {
        const body = await page.$(`${box} rect.body`) || await page.$(box);
        const b = await body.boundingBox();
        if (!b || b.width < 10 || b.height < 10) throw new Error(`its bounding box is ${JSON.stringify(b)}`);
        const x = b.x + b.width / 2, y = b.y + b.height * 0.8;
        if (x < 0 || y < 0 || x > Number(width) || y > Number(height))
            throw new Error(`it is drawn outside the window, at ${JSON.stringify(b)}`);
        return { x, y };
    });

    const menu = await run("right-clicking the processor: no context menu appeared", async () => {
        await page.mouse.click(target.x, target.y, { button: "right" });
        await page.waitForSelector(".context-menu .context-menu-item", { visible: true, timeout: 15_000 });
        return await page.$$eval(".context-menu .context-menu-item-text", (items) => items.map((i) => i.textContent.trim()));
    });

    await run(`clicking "View State" in the context menu (items: ${menu.join(", ")})`, async () => {
        const items = await page.$$(".context-menu button.context-menu-item");
        for (const item of items) {
            const text = await item.$eval(".context-menu-item-text", (t) => t.textContent.trim());
            if (text === "View State") {
                await item.click();
                return;
            }
        }
        throw new Error("no such item");
    });

    const dialog = ".component-state-dialog";
    await run("waiting for the Component State dialog", () => page.waitForSelector(dialog, { visible: true, timeout: 30_000 }));
    await run("waiting for a shard row (shardId-...) in the dialog", () => page.waitForFunction(
        (sel) => [...document.querySelectorAll(`${sel} td`)].some((td) => td.textContent.includes("shardId-")),
        { timeout: 30_000 }, dialog));
    // The dialog opens with an animation; let it settle before the picture.
    await run("waiting for the dialog's animation to end", () => page.waitForFunction(
        (sel) => !document.querySelector(sel).closest(".mat-mdc-dialog-container")?.classList.contains("mat-mdc-dialog-container-animating"),
        { timeout: 10_000 }, dialog));
    await new Promise((r) => setTimeout(r, 500));

    const text = await run("reading the dialog's text", () => page.$eval(dialog, (d) => d.innerText));
    await run(`writing the screenshot ${out}`, () => page.screenshot({ path: out, type: "png" }));
    console.log(JSON.stringify({ text, menu }));
    await browser.close();
} catch (e) {
    try {
        await page.screenshot({ path: `${out}.failed.png`, type: "png" });
    } catch {
        // the page itself is gone; the message says enough
    }
    await browser.close().catch(() => {});
    fail(step, e);
}
