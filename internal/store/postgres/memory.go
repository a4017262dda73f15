package postgres

// memorySchema is migration for the memory tables (to be written).
const memorySchema = `SELECT 1`
