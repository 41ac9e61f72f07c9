// The Collectives view (issue 27, the Ray-world stand-in for an MPI message-queue view): per
// process group, each rank's last collective enqueued, started and completed (GET
// /v1/collectives, from torch's flight recorder); the rank the others wait for is marked. Read
// when asked (the title's refresh) and again whenever the broker suspects a hang.
import * as vscode from "vscode";
import { COLLECTIVES_VIEW_ID } from "../constants";
import * as vsapi from "../common/vscodeapi";
import { BrokerConnectionService } from "../broker/brokerConnection";
import { CollectiveItem, CollectiveRow, collectiveItems } from "./collectivesModel";
import { safeTreeTexts } from "../common/textSafe";

export class CollectivesService implements vscode.TreeDataProvider<CollectiveItem>, vscode.Disposable {
  readonly treeView: vscode.TreeView<CollectiveItem>;
  items: CollectiveItem[] = [];
  private readonly changed = new vscode.EventEmitter<CollectiveItem | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly connection: BrokerConnectionService) {
    this.treeView = vsapi.createTreeView<CollectiveItem>(COLLECTIVES_VIEW_ID, { treeDataProvider: this });
    this.disposables.push(
      this.treeView,
      this.changed,
      connection.onStreamEvent((e) => {
        if (e.event === "hang") {
          void this.refresh();
        }
      }),
    );
  }

  /** raySleuth.showCollectives: read the queue now. */
  async refresh(): Promise<CollectiveItem[]> {
    const client = await this.connection.ensureClient();
    if (!client) {
      return [];
    }
    try {
      this.items = collectiveItems(await client.requestJson<CollectiveRow[]>("GET", "/v1/collectives"));
      this.treeView.message = this.items.length ? undefined : "No torch.distributed process group with a flight recorder (TORCH_FR_BUFFER_SIZE) in the cluster now.";
      this.changed.fire(undefined);
    } catch (err) {
      void vsapi.showErrorMessage(`Ray Sleuth: reading the collectives failed: ${err instanceof Error ? err.message : String(err)}`);
    }
    return this.items;
  }

  getTreeItem(item: CollectiveItem): vscode.TreeItem {
    const shown = safeTreeTexts(item); // group names and ops come from the job: escaped (#37)
    const t = new vscode.TreeItem(shown.label, item.children.length ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None);
    t.id = item.id;
    t.description = shown.description;
    t.tooltip = shown.tooltip;
    t.iconPath = new vscode.ThemeIcon(item.behind ? "warning" : item.children.length ? "git-merge" : "pass", item.behind ? new vscode.ThemeColor("list.warningForeground") : undefined);
    return t;
  }

  getChildren(item?: CollectiveItem): CollectiveItem[] {
    return item ? item.children : this.items;
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
