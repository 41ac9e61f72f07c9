// One chart webview panel (GPU memory, timeline): loads the bundled charts
// page from dist/webview (local resources only), posts it the model once the
// page is ready and again on every change, and keeps what the page reports it
// drew (tests and the log read it); can ask the page for a PNG of the chart.
import * as vscode from "vscode";
import { log } from "../common/log";
import { ChartModel, HostMessage, RenderedSummary, WebviewMessage } from "../webview/protocol";
import { chartPageHtml } from "./chartHtml";

/** Where esbuild puts the webview bundle (package.json "compile"), relative to the extension. */
export const WEBVIEW_DIST = ["dist", "webview"];

export class ChartPanel implements vscode.Disposable {
  readonly panel: vscode.WebviewPanel;
  private ready = false;
  private model: ChartModel | undefined;
  private imageSeq = 0;
  private readonly images = new Map<number, (dataUrl: string) => void>();
  private readonly rendered = new vscode.EventEmitter<RenderedSummary>();
  /** Fired with what the page drew, each time it draws something new. */
  readonly onDidRender = this.rendered.event;
  private readonly closed = new vscode.EventEmitter<void>();
  readonly onDidClose = this.closed.event;
  /** What the page last reported it drew. */
  lastRendered: RenderedSummary | undefined;
  /** The page's last error, if it reported one. */
  lastError: string | undefined;

  constructor(viewType: string, title: string, extensionUri: vscode.Uri) {
    const root = vscode.Uri.joinPath(extensionUri, ...WEBVIEW_DIST);
    this.panel = vscode.window.createWebviewPanel(viewType, title, { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true }, {
      enableScripts: true,
      retainContextWhenHidden: true,
      localResourceRoots: [root],
    });
    const webview = this.panel.webview;
    webview.html = chartPageHtml({
      title,
      cspSource: webview.cspSource,
      scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(root, "charts.js")).toString(),
      styleUri: webview.asWebviewUri(vscode.Uri.joinPath(root, "charts.css")).toString(),
    });
    webview.onDidReceiveMessage((m: WebviewMessage) => this.receive(m));
    this.panel.onDidDispose(() => {
      for (const resolve of this.images.values()) {
        resolve("");
      }
      this.images.clear();
      this.closed.fire();
      this.rendered.dispose();
      this.closed.dispose();
    });
  }

  /** Shows `model` (now, or as soon as the page is ready). */
  show(model: ChartModel): void {
    this.model = model;
    this.panel.title = model.title;
    if (this.ready) {
      this.post({ type: "model", model });
    }
  }

  /** The chart as a PNG data URL ("" when the page could not draw one within `timeoutMs`). */
  image(timeoutMs = 10_000): Promise<string> {
    const id = ++this.imageSeq;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.images.delete(id);
        resolve("");
      }, timeoutMs);
      this.images.set(id, (url) => {
        clearTimeout(timer);
        resolve(url);
      });
      this.post({ type: "image", id });
    });
  }

  reveal(): void {
    this.panel.reveal(undefined, true);
  }

  private post(message: HostMessage): void {
    this.panel.webview.postMessage(message).then(undefined, (e: unknown) => log.warn(`Posting to the ${this.panel.viewType} page failed: ${String(e)}`));
  }

  private receive(m: WebviewMessage): void {
    switch (m?.type) {
      case "ready":
        this.ready = true;
        if (this.model) {
          this.post({ type: "model", model: this.model });
        }
        return;
      case "rendered":
        this.lastRendered = m.summary;
        this.rendered.fire(m.summary);
        return;
      case "image":
        this.images.get(m.id)?.(m.dataUrl);
        this.images.delete(m.id);
        return;
      case "error":
        this.lastError = m.message;
        log.warn(`The ${this.panel.viewType} page failed: ${m.message}`);
        return;
    }
  }

  dispose(): void {
    this.panel.dispose();
  }
}
