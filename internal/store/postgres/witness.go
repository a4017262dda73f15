package postgres

// witnessSchema is migration for the witness tables (to be written).
const witnessSchema = `SELECT 1`
