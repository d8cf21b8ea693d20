// Package estate is the part of the store conformance suite (package
// storetest) on what an estate declares and tasks are allocated from: GPU
// classes, pools, profiles, resource policies, compute resources and
// projects. Exercise runs it; each function here is one group of subtests.
package estate
