package controller

// AssumedChange marks, in Explain's input, the hash of a source that is taken as changed
// since the workload's record although its hash can't be computed: the recorded hash with
// this suffix, so that it differs from the record and keeps its key set (hash.KeySet). It
// only ever lives in an explanation; nothing is written.
const AssumedChange = "~changed"
