// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * Forbids files matching `files` to import the folders `forbidden` of src/, except the files
 * `allowed` (paths under src/, as imported: `runtime/deadline.js`).
 */
function layer(files, forbidden, allowed = []) {
  return [
    {
      files,
      rules: {
        'no-restricted-imports': [
          'error',
          {
            patterns: forbidden.map((folder) => ({
              group: [
                `../${folder}/*`,
                `../../${folder}/*`,
                `../${folder}.js`,
                ...allowed
                  .filter((path) => path.startsWith(`${folder}/`))
                  .flatMap((path) => [`!../${path}`, `!../../${path}`]),
              ],
              message: `this layer must not import src/${folder}`,
            })),
          },
        ],
      },
    },
  ];
}

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.data/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-non-null-assertion': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "MemberExpression[object.name='process'][property.name='env']",
          message: 'Read settings through src/config only.',
        },
      ],
    },
  },
  {
    // A source file past this length has grown two subjects: split it where they part (issue 11).
    files: ['src/**/*.ts'],
    rules: { 'max-lines': ['error', { max: 250 }] },
  },
  // Layering: shared folders never import a role; roles never import each other. The producer is
  // the library that the HTTP intake and the CLI use, so those two may import it. src/runtime is
  // what the roles share to run (jobs, resources, shutdown): it sits above the other shared
  // folders. src/time (timeouts, sleeps, jitter) imports nothing of the project.
  ...layer(
    [
      'src/config/**',
      'src/redis/**',
      'src/telemetry/**',
      'src/agent-api/**',
      'src/dispatch/**',
      'src/simulator/**',
    ],
    ['consumer', 'poller', 'producer', 'http', 'cli', 'runtime'],
  ),
  ...layer(['src/runtime/**'], ['consumer', 'poller', 'producer', 'http', 'cli']),
  ...layer(['src/consumer/**'], ['poller', 'producer', 'http', 'cli']),
  ...layer(['src/poller/**'], ['consumer', 'producer', 'http', 'cli']),
  ...layer(['src/producer/**'], ['consumer', 'poller', 'http', 'cli']),
  ...layer(['src/http/**'], ['consumer', 'poller', 'cli']),
  // The webhook deliverer is a role of its own: it shares the runtime, never another role.
  ...layer(['src/webhooks/**'], ['consumer', 'poller', 'producer', 'http', 'cli']),
  {
    // The composition root and the config loader are the only readers of process.env; tests and
    // scripts set up child processes' environments.
    files: [
      'src/config/**',
      'src/cli.ts',
      'test/**',
      'bench/**',
      'examples/**',
      'vitest.config.ts',
    ],
    rules: { 'no-restricted-syntax': 'off' },
  },
  {
    files: ['test/**', 'bench/**'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
