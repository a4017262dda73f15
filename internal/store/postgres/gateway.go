package postgres

// gatewaySchema is migration for the gateway tables (to be written).
const gatewaySchema = `SELECT 1`
