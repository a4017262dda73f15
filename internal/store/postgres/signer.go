package postgres

// signerSchema is migration for the signer tables (to be written).
const signerSchema = `SELECT 1`
