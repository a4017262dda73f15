package postgres

// keysSchema is migration for the keys tables (to be written).
const keysSchema = `SELECT 1`
