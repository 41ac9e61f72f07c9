// verl roles and worker groups in the Cluster view and the Parallel Stacks view (issue #38):
// workers grouped by the roles they host, each group's own ranks 0..N-1 kept apart. Plain mocha,
// on worker objects shaped as the broker sends them (raysleuth/model/worker.py).
import * as assert from "assert";
import { WorkerInfo } from "../../../extension/broker/types";
import { groupWorkers, liveRanks, rankDescription, ranksByRole, roleGroupOf, workerLabel, workerTooltip } from "../../../extension/cluster/workerGrouping";
import { makeWorker } from "./workerFixture";

const BOTH = [
  { name: "actor", class_name: "ActorRole" },
  { name: "critic", class_name: "CriticRole" },
];

let nextPid = 500;
function worker(over: Partial<WorkerInfo>): WorkerInfo {
  const pid = over.pid ?? nextPid++;
  return makeWorker({ id: `w${pid}`, pid, node_id: "aaaa1111", ...over });
}

describe("Cluster view: verl roles and worker groups", () => {
  it("groups by role: a fused worker under its roles, a plain verl group under its name, other actors by class", () => {
    const tree = groupWorkers([
      worker({ pid: 1, rank: 1, actor_class: "FusedWorker_actor_critic", worker_group: "ppo", roles: BOTH }),
      worker({ pid: 2, rank: 0, actor_class: "FusedWorker_actor_critic", worker_group: "ppo", roles: BOTH }),
      worker({ pid: 3, rank: 0, actor_class: "CriticWorker", actor_name: "criticCriticWorker_0:0", worker_group: "critic" }),
      worker({ pid: 4, rank: 1, actor_class: "CriticWorker", actor_name: "criticCriticWorker_0:1", worker_group: "critic" }),
      worker({ pid: 5, rank: 0, actor_class: "WorkerDict", worker_group: "aB3xYz", roles: [{ name: "actor_rollout", class_name: "ActorRolloutRefWorker" }] }),
      worker({ pid: 6, actor_class: "Learner" }),
      worker({ pid: 7, rank: 0, actor_class: "CriticWorker", worker_group: "critic", state: "exited" }),
    ]);
    assert.deepStrictEqual(
      tree[0].groups.map((g) => [g.name, g.role ?? false, g.workers.map((w) => w.pid)]),
      [
        ["actor + critic", true, [2, 1]],
        ["actor_rollout", true, [5]],
        ["critic", true, [3, 4]],
        ["Learner", false, [6]],
        ["exited", false, [7]],
      ],
    );
  });

  it("labels a role worker by the role's own method, and names group, roles and the role now in the tooltip", () => {
    const fused = worker({ pid: 42, rank: 2, actor_class: "FusedWorker_actor_critic", worker_group: "ppo", roles: BOTH, role: "critic", task: "CriticRole.update_critic" });
    assert.strictEqual(workerLabel(fused), "rank 2 · critic · CriticRole.update_critic · pid 42");
    assert.strictEqual(workerLabel({ ...fused, task: null, role: null }), "rank 2 · ActorRole, CriticRole · pid 42");
    const tip = workerTooltip(fused).split("\n");
    for (const line of ["worker group: ppo", "roles: actor (ActorRole), critic (CriticRole)", "role now: critic", "task: CriticRole.update_critic"]) {
      assert.ok(tip.includes(line), `${line} in\n${tip.join("\n")}`);
    }
    const plain = worker({ pid: 43, rank: 1, actor_class: "CriticWorker", worker_group: "critic" });
    assert.strictEqual(workerLabel(plain), "rank 1 · CriticWorker · pid 43");
    assert.ok(!workerTooltip(plain).includes("roles:"));
  });

  it("keeps each role's ranks apart: the rank picker names both groups of rank 1", () => {
    const ws = [
      worker({ rank: 1, actor_class: "ActorWorker", worker_group: "actor" }),
      worker({ rank: 1, actor_class: "CriticWorker", worker_group: "critic" }),
      worker({ rank: 1, actor_class: "Learner" }),
    ];
    assert.strictEqual(rankDescription(liveRanks(ws)[0]), "actor, critic, Learner · 3 workers");
    assert.strictEqual(roleGroupOf(ws[2]), null);
  });

  it("Parallel Stacks: the workers at a frame, ranks by role", () => {
    const ws = [
      worker({ id: "a0", rank: 0, worker_group: "actor" }),
      worker({ id: "a1", rank: 1, worker_group: "actor" }),
      worker({ id: "c1", rank: 1, worker_group: "critic" }),
      worker({ id: "f0", rank: 0, worker_group: "ppo", roles: BOTH }),
      worker({ id: "t", rank: null }),
    ];
    assert.strictEqual(ranksByRole(["c1", "a0", "a1", "f0"], ws), "actor 0-1 · actor + critic 0 · critic 1");
    assert.strictEqual(ranksByRole(["a0", "t"], ws), "actor 0 · other");
    assert.strictEqual(ranksByRole(["t"], ws), null); // no roles: the tree's own rank text says it all
    assert.strictEqual(ranksByRole(["a0"], [worker({ id: "a0", rank: 0, worker_group: "act\u202eor" })]), "act\\u202eor 0"); // escaped (#37)
  });
});
