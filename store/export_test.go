package store

// DeliveredBatchSQL lets tests hold a delivered-watermark flush's
// statement open in a transaction of their own.
const DeliveredBatchSQL = deliveredBatchSQL
