from amas_code.amas import main

main()
