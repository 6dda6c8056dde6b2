-- Snowflake set-up for the Kinesis -> Snowflake flow. Run it whole as a user granted the ACCOUNTADMIN role, on a new
-- account or an existing one: every CREATE is IF NOT EXISTS and every GRANT can run again. It switches to the
-- system roles ACCOUNTADMIN inherits (SECURITYADMIN for roles and users, SYSADMIN for objects), as Snowflake advises.
-- Replace kinesis_db, kinesis_schema, EVENTS, kinesnow_role, kinesnow_wh and kinesnow_svc to suit (one user and role
-- per stream is recommended), and the RSA_PUBLIC_KEY value with your key's public half, made with
--   openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out rsa_key.p8   (the private half goes into
--   openssl pkey -in rsa_key.p8 -pubout                                             PutSnowflake's Private Key)
-- (the base64 body between the BEGIN and END lines). docs/setup-snowflake.md explains each step;
-- tests/snowflake-standin/tests/setup_script.rs runs this file against the stand-in.

-- The flow's role, granted to SYSADMIN: ACCOUNTADMIN inherits SYSADMIN and so this role, so the USE ROLE below
-- works for whoever runs this script, and the account's administrators keep control of what the role creates.
USE ROLE SECURITYADMIN;
CREATE ROLE IF NOT EXISTS kinesnow_role;
GRANT ROLE kinesnow_role TO ROLE SYSADMIN;

-- The service user PutSnowflake connects as, with key-pair authentication (no password).
CREATE USER IF NOT EXISTS kinesnow_svc TYPE = SERVICE DEFAULT_ROLE = kinesnow_role DEFAULT_WAREHOUSE = kinesnow_wh;
ALTER USER kinesnow_svc SET RSA_PUBLIC_KEY = 'MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA-replace-with-your-public-key';
GRANT ROLE kinesnow_role TO USER kinesnow_svc;

-- Where the rows land.
USE ROLE SYSADMIN;
CREATE DATABASE IF NOT EXISTS kinesis_db;
CREATE SCHEMA IF NOT EXISTS kinesis_db.kinesis_schema;

-- A warehouse for the SQL that reads the table: kinesnow-ctl audit's SELECT, and queries of your own. Snowpipe
-- Streaming itself needs none. It starts suspended, suspends after 60 s idle and resumes on the next query.
CREATE WAREHOUSE IF NOT EXISTS kinesnow_wh
  WAREHOUSE_SIZE = XSMALL AUTO_SUSPEND = 60 AUTO_RESUME = TRUE INITIALLY_SUSPENDED = TRUE;
GRANT USAGE ON WAREHOUSE kinesnow_wh TO ROLE kinesnow_role;

-- What Snowpipe Streaming (high-performance architecture) asks of the role: USAGE on the database and the schema,
-- and on the table OWNERSHIP (the role creates the table below) or INSERT, plus EVOLVE SCHEMA for schema evolution.
GRANT USAGE ON DATABASE kinesis_db TO ROLE kinesnow_role;
GRANT USAGE ON SCHEMA kinesis_db.kinesis_schema TO ROLE kinesnow_role;
GRANT CREATE TABLE ON SCHEMA kinesis_db.kinesis_schema TO ROLE kinesnow_role;

-- The table, owned by the flow's role. Standard table: first-level JSON keys become columns (schema evolution),
-- rejected rows go to the table's error table. Its default pipe (EVENTS-STREAMING) needs no grant of its own.
USE ROLE kinesnow_role;
USE WAREHOUSE kinesnow_wh;
CREATE TABLE IF NOT EXISTS kinesis_db.kinesis_schema.EVENTS (kinesisMetadata OBJECT)
  ENABLE_SCHEMA_EVOLUTION = TRUE
  ERROR_LOGGING = TRUE;

-- A named pipe of your own instead of the default pipe (PutSnowflake's Pipe): create it as the role, or, created by
-- another role, grant it: GRANT OPERATE ON PIPE kinesis_db.kinesis_schema.EVENTS_PIPE TO ROLE kinesnow_role;
-- Iceberg instead (Iceberg Enabled = true): the metadata object must be structured, and carries every field; an
-- external volume you manage also needs GRANT USAGE ON EXTERNAL VOLUME <volume> TO ROLE kinesnow_role.
-- CREATE ICEBERG TABLE kinesis_db.kinesis_schema.EVENTS (
--   kinesisMetadata OBJECT(stream STRING, shardId STRING, approximateArrival BIGINT, partitionKey STRING,
--                          sequenceNumber STRING, subSequenceNumber INTEGER, shardedSequenceNumber STRING))
--   CATALOG = 'SNOWFLAKE' EXTERNAL_VOLUME = '<volume>' BASE_LOCATION = 'events' ENABLE_SCHEMA_EVOLUTION = TRUE;
