"""A user's Python program in a fresh virtual environment: the Python SDK installed with pip from its
wheel (as from PyPI), an inline Pulumi program run through the Automation API with one gate. No
plugin is installed beforehand; the engine downloads it from the plugin_download_url given here (a
mirror; the SDK's own default is the GitHub releases of readiness-io/pulumi-readiness).

Usage: python app.py <work dir> <kubeconfig file> <plugin server URL>. Prints {"readyNodes": N}."""

import json
import sys

import pulumi
import pulumi_readiness as readiness
from pulumi import automation as auto


def main(work_dir: str, kubeconfig_file: str, server: str) -> None:
    def program() -> None:
        nodes = readiness.NodesReady("nodes", min_count=1, timeout="2m",
                                     opts=pulumi.ResourceOptions(plugin_download_url=server))
        pulumi.export("readyNodes", nodes.ready_nodes)

    stack = auto.create_or_select_stack(stack_name="dev", project_name="install-py", program=program,
                                        opts=auto.LocalWorkspaceOptions(work_dir=work_dir))
    with open(kubeconfig_file) as f:
        stack.set_config("readiness:kubeconfig", auto.ConfigValue(value=f.read(), secret=True))
    try:
        up = stack.up(on_output=lambda s: print(s, file=sys.stderr))
        print(json.dumps({"readyNodes": up.outputs["readyNodes"].value}))
    finally:
        stack.destroy(on_output=lambda s: print(s, file=sys.stderr))
        stack.workspace.remove_stack("dev")


if __name__ == "__main__":
    main(*sys.argv[1:4])
