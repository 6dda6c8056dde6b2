-- Snowflake set-up for the Kinesis -> Snowflake flow (run as SECURITYADMIN, then as the new role).
-- Replace kinesis_db, kinesis_schema, EVENTS and the names to suit; one user and role per stream is recommended.
USE ROLE securityadmin;
CREATE ROLE IF NOT EXISTS kinesnow_role;
CREATE USER IF NOT EXISTS kinesnow_svc TYPE = SERVICE DEFAULT_ROLE = kinesnow_role;
-- the public half of the key pair whose private half goes into "Snowflake Private Key" (PKCS#8):
--   openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out rsa_key.p8
--   openssl pkey -in rsa_key.p8 -pubout
ALTER USER kinesnow_svc SET RSA_PUBLIC_KEY = '<public key body without the BEGIN/END lines>';
GRANT ROLE kinesnow_role TO USER kinesnow_svc;
GRANT USAGE ON DATABASE kinesis_db TO ROLE kinesnow_role;
GRANT USAGE ON SCHEMA kinesis_db.kinesis_schema TO ROLE kinesnow_role;
GRANT CREATE TABLE ON SCHEMA kinesis_db.kinesis_schema TO ROLE kinesnow_role;

USE ROLE kinesnow_role;
-- Standard table: first-level JSON keys become columns (schema evolution), rejected rows go to the error table.
CREATE TABLE IF NOT EXISTS kinesis_db.kinesis_schema.EVENTS (kinesisMetadata OBJECT)
  ENABLE_SCHEMA_EVOLUTION = TRUE
  ERROR_LOGGING = TRUE;
-- Iceberg instead (Iceberg Enabled = true): the metadata object must be structured, and carries every field.
-- CREATE ICEBERG TABLE kinesis_db.kinesis_schema.EVENTS (
--   kinesisMetadata OBJECT(stream STRING, shardId STRING, approximateArrival BIGINT, partitionKey STRING,
--                          sequenceNumber STRING, subSequenceNumber INTEGER, shardedSequenceNumber STRING))
--   CATALOG = 'SNOWFLAKE' EXTERNAL_VOLUME = '<volume>' BASE_LOCATION = 'events' ENABLE_SCHEMA_EVOLUTION = TRUE;
