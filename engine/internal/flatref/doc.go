// Package flatref is the engine's pass as it was before the organisation
// tree (issue 32), frozen at commit 66494dc (less one unused function) and
// kept only as the reference
// that TestFlatEstatesDecideAsBefore compares the engine with: over random
// flat estates (every group directly under the tenant) the engine must
// decide exactly what this code decides. Nothing else imports it; do not
// change it, other than to delete it once flat estates need no such proof.
package flatref
