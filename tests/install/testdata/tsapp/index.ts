// A user's TypeScript program in a fresh directory: the Node.js SDK installed from its packed tarball
// (as from the npm registry), an inline Pulumi program run through the Automation API with one
// gate. No plugin is installed beforehand; the engine downloads it from the pluginDownloadURL given
// here (a mirror; the SDK's own default is the GitHub releases of readiness-io/pulumi-readiness).
//
// Usage: node index.js <work dir> <kubeconfig file> <plugin server URL>. Prints {"readyNodes": N}.
import * as fs from "fs";
import { LocalWorkspace } from "@pulumi/pulumi/automation";
import * as readiness from "@readiness-io/pulumi-readiness";

async function main(workDir: string, kubeconfigFile: string, server: string): Promise<void> {
    const program = async () => {
        const nodes = new readiness.NodesReady("nodes", { minCount: 1, timeout: "2m" }, { pluginDownloadURL: server });
        return { readyNodes: nodes.readyNodes };
    };
    const stack = await LocalWorkspace.createOrSelectStack({ stackName: "dev", projectName: "install-ts", program }, { workDir });
    await stack.setConfig("readiness:kubeconfig", { value: fs.readFileSync(kubeconfigFile, "utf8"), secret: true });
    try {
        const up = await stack.up({ onOutput: (s) => process.stderr.write(s) });
        console.log(JSON.stringify({ readyNodes: up.outputs.readyNodes.value }));
    } finally {
        await stack.destroy({ onOutput: (s) => process.stderr.write(s) });
        await stack.workspace.removeStack("dev");
    }
}

main(process.argv[2], process.argv[3], process.argv[4]).catch((err) => {
    console.error(`app: ${err}`);
    process.exit(1);
});
