// Gates that block a Pulumi deployment until Kubernetes is really ready: CRDs established, webhooks serving, certificates issued, rollouts done.
package readiness
